// docs/log.md promises that a third party checks records with the openssl CLI and the chain
// with reference/log_check.py (python3 standard library), never with veritrain's own code.

#include <gtest/gtest.h>

#include "common/file_io.h"
#include "common/sha256.h"
#include "protocol/log.h"
#include "tests/test_util.h"

namespace vt {
namespace {

const Digest kThirdPartyTask = sha256(std::string_view("third-party task"));

CommitRecord third_party_record(std::uint64_t epoch) {
  CommitRecord r;
  r.task_id = kThirdPartyTask;
  r.epoch = epoch;
  r.root = sha256("root " + std::to_string(epoch));
  r.fingerprint = nlohmann::json{{"values", {0.5, 1.5}}};
  r.tracking_fingerprint = nlohmann::json::array();
  r.metrics = {.loss = 0.5, .steps = 8, .seconds = 0.25, .samples = 64, .eval = std::nullopt};
  return r;
}

std::string openssl_verify(const testing::ScratchDir& dir, const std::string& folder) {
  return "openssl pkeyutl -verify -pubin -inkey " + (dir / folder).string() +
         "/signer.pem -rawin -in " + (dir / folder).string() + "/body -sigfile " +
         (dir / folder).string() + "/sig";
}

TEST(LogThirdParty, OpensslVerifiesARecordCutFromTheFile) {
  if (!testing::have_program("openssl")) GTEST_SKIP() << "openssl CLI not installed";
  testing::ScratchDir dir;
  auto key = *SigningKey::generate();
  auto log = CommitLog::open(dir / "log", kThirdPartyTask, LogMode::kAppend);
  ASSERT_TRUE(log.ok());
  for (std::uint64_t e = 0; e < 3; ++e) ASSERT_TRUE(log->append(third_party_record(e), key).ok());

  // Body: the bytes before the tab on line 2, cut with text tools only. The parentheses keep
  // run_command's "</dev/null" off the pipeline's last stage.
  auto cut = testing::run_command("(mkdir -p " + (dir / "e1").string() + " && sed -n 2p " +
                                      (dir / "log").string() + " | cut -f1 | tr -d '\\n' > " +
                                      (dir / "e1/body").string() + " && sed -n 2p " +
                                      (dir / "log").string() + " | cut -f2 | tr -d '\\n')",
                                  dir.path());
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  auto sig = hex_decode(cut.out);
  ASSERT_TRUE(sig.ok() && !sig->empty()) << "[" << cut.out << "][" << cut.err << "]";
  EXPECT_EQ(*sig, log->records()[1].signature);
  ASSERT_TRUE(write_file_atomic(dir / "e1/sig", *sig).ok());
  // The key as the record names it, not as we hold it.
  auto signer = PublicKey::from_raw(log->records()[1].record.signer);
  ASSERT_TRUE(write_file_atomic(dir / "e1/signer.pem", signer->to_pem()).ok());
  EXPECT_EQ(*read_text_file(dir / "e1/body"), log->records()[1].body);

  auto ok = testing::run_command(openssl_verify(dir, "e1"), dir.path());
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("Signature Verified Successfully"), std::string::npos);
  std::string body = *read_text_file(dir / "e1/body");
  body[body.find("\"epoch\":1") + 8] = '7';
  ASSERT_TRUE(write_file_atomic(dir / "e1/body", std::string_view(body)).ok());
  EXPECT_NE(testing::run_command(openssl_verify(dir, "e1"), dir.path()).exit_code, 0);
}

TEST(LogThirdParty, PythonScriptChecksChainAndExtractsForOpenssl) {
  if (!testing::have_program("python3") || !testing::have_program("openssl")) {
    GTEST_SKIP() << "python3 or openssl not installed";
  }
  const std::string script = std::string(VT_SOURCE_DIR) + "/reference/log_check.py";
  testing::ScratchDir dir;
  auto key = *SigningKey::generate();
  auto log = CommitLog::open(dir / "log", kThirdPartyTask, LogMode::kAppend);
  ASSERT_TRUE(log.ok());
  for (std::uint64_t e = 0; e < 3; ++e) ASSERT_TRUE(log->append(third_party_record(e), key).ok());
  const std::string log_path = (dir / "log").string();

  auto good = testing::run_command("python3 " + script + " " + log_path + " --task-id " +
                                       hex_encode(kThirdPartyTask) + " --extract 2 " +
                                       (dir / "e2").string(),
                                   dir.path());
  ASSERT_EQ(good.exit_code, 0) << good.err;
  EXPECT_EQ(good.out, log_path + ": 3 records, chain intact, task " + hex_encode(kThirdPartyTask) +
                          ", head " + hex_encode(log->head()) + "\n");
  auto verified = testing::run_command(openssl_verify(dir, "e2"), dir.path());
  EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;

  auto other_task = testing::run_command(
      "python3 " + script + " " + log_path + " --task-id " + std::string(64, '0'), dir.path());
  EXPECT_EQ(other_task.exit_code, 1);
  EXPECT_NE(other_task.err.find("epoch 0 (line 1): task_id"), std::string::npos) << other_task.err;

  // Properly signed records whose chain is broken at epoch 2: only the chain check sees it.
  Bytes forged;
  Digest prev{};
  for (std::uint64_t e = 0; e < 3; ++e) {
    CommitRecord r = third_party_record(e);
    r.time = "2025-06-01T00:00:00Z";
    r.prev = e == 2 ? sha256(std::string_view("not the previous record")) : prev;
    auto s = *sign_record(r, key);
    prev = s.hash;
    append_bytes(forged, encode_record(s));
  }
  ASSERT_TRUE(write_file_atomic(dir / "forged", forged).ok());
  auto broken =
      testing::run_command("python3 " + script + " " + (dir / "forged").string(), dir.path());
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_NE(broken.err.find("epoch 2 (line 3): prev"), std::string::npos) << broken.err;
}

// docs/log.md's example: written by python3 and `openssl pkeyutl -sign`, no veritrain code.
// Our reader must accept what the documentation tells others to produce.
constexpr std::string_view kDocsExample =
    R"({"data_order_digest":"202f8b12ba2c0a98fd65c03dfa303715b72c28bbf98a0bd0c30bdcc6428b30c1","e)"
    R"(poch":0,"fingerprint":{"values":[0.5,-1.25]},"format":"veritrain.commit.v1","metrics":{"lo)"
    R"(ss":2.302,"samples":0,"seconds":0.0,"steps":0},"prev":"00000000000000000000000000000000000)"
    R"(00000000000000000000000000000","root":"fb0ee5f33935284ce07c9315b4f4a8a5d121df7feffc49ce04e)"
    R"(5fa7a30c5a16c","signer":"c7c7d2ca4944718917a0d4a8430789b02f36dbf04bcd5b2bb8e038669806afc9")"
    R"(,"task_id":"88c4caa8e29e58a12d5c1410fbf91bf15ff4b0498582327a3ba8a68ebbd1cec3","time":"2025)"
    R"(-06-01T12:00:00.000Z","tracking_fingerprint":{"values":[1.0]},"trail":[]})"
    "\t"
    R"(094f0426d582923ae086415ca80f3b9c0111f0058ee255a5d3ac3faa764adcddac6cf4d9129c6a7b2bc84fffb5)"
    R"(bbc639df566d8bd9b68ff7f032731ca352c00c)"
    "\n"
    R"({"data_order_digest":"f3d6f0d55b053fdeb0116c2eaffd74e9113b2fd19d7d0675fd8c87a430993b8d","e)"
    R"(poch":1,"fingerprint":{"values":[0.5,-1.25]},"format":"veritrain.commit.v1","metrics":{"lo)"
    R"(ss":1.875,"samples":512,"seconds":1.5,"steps":16},"prev":"561dd8eb850aa9912a3173974e1bbec6)"
    R"(56fdf7984ea91296cb559d5aa7e4c290","root":"2b53d21379ba77e920034c3734e7cbea835bb9cfe19db252)"
    R"(687bfa0d505139cf","signer":"c7c7d2ca4944718917a0d4a8430789b02f36dbf04bcd5b2bb8e038669806af)"
    R"(c9","task_id":"88c4caa8e29e58a12d5c1410fbf91bf15ff4b0498582327a3ba8a68ebbd1cec3","time":"2)"
    R"(025-06-01T12:00:01.000Z","tracking_fingerprint":{"values":[1.0]},"trail":[{"step":8}]})"
    "\t"
    R"(a1f45c9b30357892d11cebd64624432397de44fd7b6896f7c68d52bace87b6154743770819823e5784d2c04302)"
    R"(bff56d3ce6ee2a96cf6eee6bcc3633639dd004)"
    "\n";

TEST(LogThirdParty, DocsExampleWrittenWithoutVeritrainVerifies) {
  auto file = read_log(as_bytes(kDocsExample), "docs/log.md");
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_FALSE(file->torn_tail.has_value());
  auto task =
      *digest_from_hex("88c4caa8e29e58a12d5c1410fbf91bf15ff4b0498582327a3ba8a68ebbd1cec3", "task");
  auto check = verify_log(file->records, task);
  ASSERT_TRUE(check.ok()) << check.error().message;
  EXPECT_EQ(check->records, 2u);
  EXPECT_EQ(hex_encode(check->head),
            "bdc9535faf4f807fa0b457149ba2935def02f08d2e86ee6208322594baee34d0");
  EXPECT_EQ(file->records[1].record.trail.size(), 1u);
  EXPECT_EQ(file->records[1].record.metrics.steps, 16u);
  // Re-encoding gives back the very bytes: nothing was re-serialized on the way.
  Bytes again;
  for (const auto& r : file->records) append_bytes(again, encode_record(r));
  EXPECT_EQ(std::string(again.begin(), again.end()), kDocsExample);
}

}  // namespace
}  // namespace vt

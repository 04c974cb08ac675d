// The verifier end to end over loopback TLS against a real provider process.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "protocol/keys.h"
#include "protocol/log.h"
#include "tests/protocol/hostile_provider.h"
#include "tests/protocol/net_util.h"
#include "tests/test_util.h"
#include "verifier/check/verify.h"

namespace vt {
namespace {
namespace fs = std::filesystem;
using testing::run_command;
using testing::veritrain_binary;

struct Provider {
  std::string task;
  fs::path workdir;
  std::uint16_t port = 0;
  std::string pin;
  fs::path token;
};

std::string make_task(const testing::ScratchDir& dir, const std::string& name,
                      const std::string& extra) {
  auto path = (dir / name).string();
  auto r = run_command(veritrain_binary() +
                           " task init --model mlp --epochs 4 --steps-per-epoch 3 --batch-size 8 "
                           "--data-option samples=64 " +
                           extra + " --out " + path,
                       dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

Provider train(const testing::ScratchDir& dir, const std::string& task,
               const std::string& extra = "") {
  Provider p{task, dir / "wd", testing::free_port(), "", dir / "token"};
  auto r = run_command(veritrain_binary() + " train --task " + task + " --workdir " +
                           p.workdir.string() + " " + extra,
                       dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(
      write_file_atomic(p.token, std::string_view("0123456789abcdef0123456789abcdef\n"), 0600)
          .ok());
  p.pin = *certificate_fingerprint(p.workdir / "keys/tls.cert.pem");
  return p;
}

std::vector<std::string> serve_argv(const Provider& p) {
  return {veritrain_binary(), "serve",         "--workdir",
          p.workdir.string(), "--listen",      "127.0.0.1:" + std::to_string(p.port),
          "--token-file",     p.token.string()};
}

testing::CommandResult verify(const testing::ScratchDir& dir, const Provider& p,
                              const std::string& task, const std::string& extra = "") {
  // The server needs a moment to listen; the client retries only within one call.
  testing::CommandResult r;
  for (int attempt = 0; attempt < 50; ++attempt) {
    r = run_command(veritrain_binary() + " --json verify --task " + task +
                        " --provider 127.0.0.1:" + std::to_string(p.port) + " --token-file " +
                        p.token.string() + " --pin " + p.pin + " --report " +
                        (dir / "report").string() + " " + extra,
                    dir.path());
    if (r.exit_code != 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return r;
}

TEST(VerifyE2E, HonestProviderIsAcceptedOverTls) {
  testing::ScratchDir dir;
  auto task = make_task(dir, "task.json", "");
  // Regression: a whole snapshot stored every 2 epochs, answered to a delta request, was once
  // decoded with the client's base and the honest provider rejected.
  Provider p = train(dir, task, "--full-every 2");
  testing::Background server(serve_argv(p), dir / "serve.log");
  auto r = verify(dir, p, task, "--check-probability 1 --seed 01");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << *read_text_file(dir / "serve.log");
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["result"], "accepted");
  EXPECT_EQ(j["checks"].size(), 4u);
  EXPECT_TRUE(fs::exists(dir / "report/verdict.json"));
  EXPECT_TRUE(fs::exists(dir / "report/report.html"));
}

TEST(VerifyE2E, ALogForATaskWithAnotherHyperparameterIsRejected) {
  testing::ScratchDir dir;
  auto task = make_task(dir, "task.json", "");
  Provider p = train(dir, task);
  auto other = make_task(dir, "other.json", "--lr 0.06");  // what the requestor paid for
  testing::Background server(serve_argv(p), dir / "serve.log");
  auto r = verify(dir, p, other);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("not to this task"), std::string::npos) << r.out;
}

TEST(VerifyE2E, ATamperedStoredSnapshotIsRejectedWithItsEpoch) {
  testing::ScratchDir dir;
  auto task = make_task(dir, "task.json", "");
  Provider p = train(dir, task, "--full-every 1");
  auto log = read_log(p.workdir / "commitments.log");
  auto file = p.workdir / "snapshots" / (hex_encode(log->records[2].record.root) + ".vtc");
  auto bytes = *read_file(file);
  bytes[bytes.size() - 20] ^= 0x40;
  ASSERT_TRUE(write_file_atomic(file, bytes).ok());
  auto r = run_command(veritrain_binary() + " verify --task " + task + " --workdir " +
                           p.workdir.string() + " --check-probability 1 --report " +
                           (dir / "report").string(),
                       dir.path());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("epoch 2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ACCEPTED"), std::string::npos);
}

// A provider that is reached but does not deliver a challenged snapshot is judged: a signed
// rejection naming the epoch, not an error without a verdict.
TEST(VerifyE2E, ASnapshotTheServerDoesNotHaveIsWithheldAndRejected) {
  testing::ScratchDir dir;
  auto task = make_task(dir, "task.json", "");
  Provider p = train(dir, task, "--full-every 1");
  auto log = read_log(p.workdir / "commitments.log");
  ASSERT_TRUE(
      fs::remove(p.workdir / "snapshots" / (hex_encode(log->records[2].record.root) + ".vtc")));
  testing::Background server(serve_argv(p), dir / "serve.log");
  auto r = verify(dir, p, task, "--check-probability 1 --seed 01 --evidence-timeout 5");
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["result"], "rejected");
  EXPECT_NE(j["reasons"].dump().find("epoch 2"), std::string::npos) << j["reasons"].dump();
  EXPECT_TRUE(fs::exists(dir / "report/verdict.json"));
}

// Once reached, a provider that stops answering has --evidence-timeout to deliver; then the
// evidence is withheld (a rejection), not an I/O error of the verifier's.
TEST(VerifyE2E, EvidenceNotDeliveredWithinTheTimeoutIsWithheld) {
  testing::ScratchDir dir;
  auto task = make_task(dir, "task.json", "");
  Provider p = train(dir, task);
  std::optional<testing::Background> server;
  server.emplace(serve_argv(p), dir / "serve.log");
  ClientConfig config;
  config.port = p.port;
  config.token = "0123456789abcdef0123456789abcdef";
  config.pin_sha256 = p.pin;
  std::unique_ptr<verifier::EvidenceSource> source;
  for (int i = 0; i < 100 && !source; ++i) {
    if (auto s = verifier::open_provider_source(config, std::chrono::seconds(2)); s.ok()) {
      source = std::move(*s);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ASSERT_TRUE(source) << *read_text_file(dir / "serve.log");
  auto task_spec = load_task(p.task);
  ASSERT_TRUE(task_spec.ok());
  source->set_limits(verifier::limits_for(*task_spec));
  auto log = source->log();
  ASSERT_TRUE(log.ok()) << log.error().message;
  server.reset();  // the provider goes away after it was reached
  const auto t0 = std::chrono::steady_clock::now();
  auto snapshot = source->snapshot(1, log->at(1).record.root, std::nullopt);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(snapshot.ok());
  EXPECT_EQ(snapshot.error().code, Errc::kRejected) << snapshot.error().message;
  EXPECT_NE(snapshot.error().message.find(
                "the epoch 1 snapshot is withheld: not delivered within --evidence-timeout 2 s"),
            std::string::npos)
      << snapshot.error().message;
  EXPECT_GE(seconds, 2.0);
  EXPECT_LT(seconds, 15.0);
}

TEST(VerifyE2E, AWrongTokenIsRefusedAndNeverAccepted) {
  testing::ScratchDir dir;
  auto task = make_task(dir, "task.json", "");
  Provider p = train(dir, task);
  testing::Background server(serve_argv(p), dir / "serve.log");
  Provider wrong = p;
  wrong.token = dir / "wrong-token";
  ASSERT_TRUE(
      write_file_atomic(wrong.token, std::string_view("ffffffffffffffffffffffffffffffff\n"), 0600)
          .ok());
  // verify() retries exit 3 while the server starts, and this answer is exit 3 for good: wait
  // until the server listens instead.
  for (int i = 0; i < 100; ++i) {
    const int fd = testing::connect_loopback(p.port);
    if (fd >= 0) {
      ::close(fd);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto r = run_command(veritrain_binary() + " verify --task " + task + " --provider 127.0.0.1:" +
                           std::to_string(p.port) + " --token-file " + wrong.token.string() +
                           " --pin " + p.pin + " --report " + (dir / "report-wrong").string(),
                       dir.path());
  // The provider's word that the token is wrong: nothing could be judged, and the verifier
  // cannot tell its own wrong token from a provider that refuses everyone.
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("unauthorized: hello: the bearer token is missing or wrong"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("accepted"), std::string::npos);
}

TEST(VerifyE2E, AnUnreachableProviderIsAnIoError) {
  testing::ScratchDir dir;
  auto task = make_task(dir, "task.json", "");
  Provider p = train(dir, task);  // nothing serves it
  auto r = run_command(veritrain_binary() + " verify --task " + task + " --provider 127.0.0.1:" +
                           std::to_string(p.port) + " --token-file " + p.token.string() +
                           " --pin " + p.pin + " --report " + (dir / "report").string(),
                       dir.path());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("127.0.0.1:" + std::to_string(p.port)), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "report/verdict.json"));
}

// `verify --insecure` against a loopback provider that turns hostile in `mode`.
testing::CommandResult verify_hostile(const testing::ScratchDir& dir, testing::Hostility mode) {
  auto task = make_task(dir, "task.json", "");
  testing::HostileOptions o;
  o.mode = mode;
  testing::HostileProvider provider(o);
  const fs::path token = dir / "token";
  EXPECT_TRUE(write_file_atomic(token, std::string_view("any token\n"), 0600).ok());
  return run_command(veritrain_binary() + " verify --task " + task + " --provider 127.0.0.1:" +
                         std::to_string(provider.port()) + " --insecure --token-file " +
                         token.string() + " --report " + (dir / "report").string(),
                     dir.path());
}

TEST(VerifyE2E, AMalformedHelloIsAnIoErrorNotTheVerifiersInputError) {
  testing::ScratchDir dir;
  auto r = verify_hostile(dir, testing::Hostility::kHugeHelloHeader);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("hello frame: header of 4294967295 bytes exceeds the limit"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("nothing could be judged"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "report/verdict.json"));
}

TEST(VerifyE2E, AMalformedFrameAfterHelloIsASignedRejection) {
  testing::ScratchDir dir;
  auto r = verify_hostile(dir, testing::Hostility::kMalformedLog);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  auto text = read_text_file(dir / "report/verdict.json");
  ASSERT_TRUE(text.ok()) << text.error().message;
  const auto verdict = nlohmann::json::parse(*text)["verdict"];
  EXPECT_EQ(verdict["result"], "rejected");
  ASSERT_EQ(verdict["log_failures"].size(), 1u) << verdict.dump();
  const std::string failure = verdict["log_failures"][0];
  EXPECT_NE(failure.find("the commitment log: get_log from 127.0.0.1:"), std::string::npos)
      << failure;
  EXPECT_NE(failure.find("bad magic 4e4f5045"), std::string::npos) << failure;
}

// The thresholds task init writes for tolerance mode admit an honest replay at another thread
// count, and the verdict says the setup differed.
TEST(VerifyE2E, ToleranceModeAcceptsAReplayAtAnotherThreadCount) {
  testing::ScratchDir dir;
  auto task = (dir / "task.json").string();
  ASSERT_EQ(run_command(
                veritrain_binary() +
                    " task init --model gpt --option d_model=32 --option layers=1 --option heads=2 "
                    "--option seq_len=16 --option vocab=32 --data-option samples=64 --batch-size 8 "
                    "--epochs 3 --steps-per-epoch 4 --determinism tolerance --out " +
                    task,
                dir.path())
                .exit_code,
            0);
  Provider p = train(dir, task);
  auto r = run_command(veritrain_binary() + " --json verify --task " + task + " --workdir " +
                           p.workdir.string() + " --threads 2 --check-probability 1 --report " +
                           (dir / "report").string(),
                       dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["result"], "accepted");
  EXPECT_NE(r.out.find("intra-op threads"), std::string::npos)
      << "the verdict should note the other thread count";
}

// --online: epochs are challenged and replayed while the provider is still training. Epochs long
// enough that the fixed costs of a replay (a fresh model, a fetch over TLS) stay well below the
// five epochs still to train when epoch 1 is committed.
TEST(VerifyE2E, OnlineChecksEpochsBeforeTrainingFinishes) {
  testing::ScratchDir dir;
  auto task = (dir / "task.json").string();
  ASSERT_EQ(
      run_command(veritrain_binary() +
                      " task init --model cnn --option width=8 --epochs 6 --steps-per-epoch 48 "
                      "--data-option samples=64 --batch-size 8 --out " +
                      task,
                  dir.path())
          .exit_code,
      0);
  ASSERT_TRUE(generate_identity(dir / "keys").ok());
  const auto token = dir / "token";
  ASSERT_TRUE(
      write_file_atomic(token, std::string_view("0123456789abcdef0123456789abcdef\n"), 0600).ok());
  const std::uint16_t port = testing::free_port();
  testing::Background provider(
      {veritrain_binary(), "train", "--task", task, "--workdir", (dir / "wd").string(), "--key",
       (dir / "keys").string(), "--serve", "127.0.0.1:" + std::to_string(port), "--tls-cert",
       (dir / "keys/tls.cert.pem").string(), "--tls-key", (dir / "keys/tls.key.pem").string(),
       "--token-file", token.string()},
      dir / "provider.log");
  ClientConfig config;
  config.port = port;
  config.token = "0123456789abcdef0123456789abcdef";
  config.pin_sha256 = *certificate_fingerprint(dir / "keys/tls.cert.pem");
  std::unique_ptr<verifier::EvidenceSource> source;
  for (int i = 0; i < 100 && !source; ++i) {
    if (auto s = verifier::open_provider_source(config); s.ok()) {
      source = std::move(*s);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ASSERT_TRUE(source) << *read_text_file(dir / "provider.log");
  Task t = *load_task(task);
  verifier::VerifyOptions o;
  o.online = true;
  o.policy.check_probability = 1.0;
  o.seed_hex = "02";
  o.trainer.task_dir = dir.path();
  std::size_t committed_when_first_check_done = 0;
  o.on_event = [&](const std::string& line) {
    if (committed_when_first_check_done == 0 &&
        line.find("epoch 1: replay matches") != std::string::npos) {
      committed_when_first_check_done = read_log(dir / "wd/commitments.log")->records.size();
    }
  };
  auto verdict = verifier::verify(*source, t, o);
  ASSERT_TRUE(verdict.ok()) << verdict.error().message;
  EXPECT_TRUE(verdict->accepted) << (verdict->reasons.empty() ? "" : verdict->reasons.front());
  EXPECT_EQ(verdict->checks.size(), 6u);
  ASSERT_GT(committed_when_first_check_done, 0u);
  EXPECT_LT(committed_when_first_check_done, 7u)
      << "epoch 1 was only checked after training had finished";
}

}  // namespace
}  // namespace vt

// The forger through the `veritrain` binary: what a provider gets wrong is exit 1 with a signed
// verdict.json; exit 2 is the verifier's own inputs; the trust anchor on verify, log verify and
// audit; the persistent verifier key; `verdict check`.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "tests/adversary/forger.h"
#include "tests/adversary/support.h"

namespace vt::adversary {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::veritrain_binary;

struct Cli {
  testing::ScratchDir dir;
  Task task = tiny_task(31);
  fs::path wd = dir / "wd";
  Cli() {
    auto run = write_workdir(task, wd, {}, provider_key());
    EXPECT_TRUE(run.ok()) << run.error().message;
  }
  std::string task_file() const { return (wd / "task.json").string(); }
  testing::CommandResult verify(const std::string& extra,
                                const std::string& report = "report") const {
    return run_command(veritrain_binary() + " --json verify --task " + task_file() + " --workdir " +
                           wd.string() + " --check-probability 1 --seed 01 --jobs 1 --report " +
                           (dir / report).string() + " " + extra,
                       dir.path());
  }
  fs::path snapshot(std::uint64_t epoch) const {
    auto log = read_log(wd / "commitments.log");
    return wd / "snapshots" / (hex_encode(log->records.at(epoch).record.root) + ".vtc");
  }
  fs::path config() const {
    return dir / ".config" / "veritrain" / "verifier";
  }  // run_command's XDG_CONFIG_HOME
};

std::string provider_fp() { return provider_key().public_key().fingerprint(); }

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 0777;
}

TEST(ForgerCli, WithheldSnapshotIsExitOneWithASignedVerdict) {
  Cli c;
  ASSERT_TRUE(fs::remove(c.snapshot(2)));
  auto r = c.verify("--provider-key " + provider_fp());
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["result"], "rejected");
  EXPECT_NE(j["reasons"].dump().find("epoch 2 snapshot is withheld"), std::string::npos)
      << j["reasons"].dump();
  EXPECT_EQ(j["provider"]["key"], provider_fp());
  EXPECT_EQ(j["provider"]["pinned"], true);
  ASSERT_TRUE(fs::exists(c.dir / "report/verdict.json"));
  ASSERT_TRUE(fs::exists(c.dir / "report/report.html"));

  // The verdict checks out, names both keys, and a changed byte does not.
  auto check = run_command(
      veritrain_binary() + " --json verdict check " + (c.dir / "report/verdict.json").string(),
      c.dir.path());
  ASSERT_EQ(check.exit_code, 0) << check.out << check.err;
  auto cj = nlohmann::json::parse(check.out);
  EXPECT_EQ(cj["result"], "rejected");
  EXPECT_EQ(cj["provider_key"], provider_fp());
  const std::string verifier = cj["signer"].get<std::string>();
  EXPECT_EQ(verifier, j["verifier"]["fingerprint"]);
  auto signer_ok =
      run_command(veritrain_binary() + " verdict check " +
                      (c.dir / "report/verdict.json").string() + " --signer " + verifier,
                  c.dir.path());
  EXPECT_EQ(signer_ok.exit_code, 0) << signer_ok.err;
  auto signer_bad =
      run_command(veritrain_binary() + " verdict check " +
                      (c.dir / "report/verdict.json").string() + " --signer " + provider_fp(),
                  c.dir.path());
  EXPECT_EQ(signer_bad.exit_code, 1) << signer_bad.err;
  std::string text = *read_text_file(c.dir / "report/verdict.json");
  const auto at = text.find("\"rejected\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 10, "\"accepted\"");
  ASSERT_TRUE(write_file_atomic(c.dir / "edited.json", text).ok());
  auto edited = run_command(
      veritrain_binary() + " verdict check " + (c.dir / "edited.json").string(), c.dir.path());
  EXPECT_EQ(edited.exit_code, 1) << edited.err;
}

TEST(ForgerCli, BadMetadataIsExitOneNotAnInputError) {
  Cli c;
  Status s = reforge_workdir(
      c.wd, provider_key(), [&](std::uint64_t e, CommitRecord& r, Bytes& state) -> Status {
        if (e != 2) return {};
        VT_ASSIGN_OR_RETURN(state, rewrite_metadata(state, {{"intra_op_threads", "2"}}));
        return commit_state(c.task, e, state, r);
      });
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto r = c.verify("");
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("metadata intra_op_threads is \\\"2\\\""), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(c.dir / "report/verdict.json"));
  // Unpinned: verify warns, and the verdict says so.
  EXPECT_NE(r.err.find("no --provider-key"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["provider"]["pinned"], false);
}

// Metadata is the provider's text: quoted in a reason, it must not drive the verifier's terminal
// (ESC[8m would hide the REJECTED line after it) nor flood it.
TEST(ForgerCli, ProviderTextInAReasonIsEscapedAndCut) {
  Cli c;
  Status s = reforge_workdir(
      c.wd, provider_key(), [&](std::uint64_t e, CommitRecord& r, Bytes& state) -> Status {
        if (e != 2) return {};
        VT_ASSIGN_OR_RETURN(
            state, rewrite_metadata(state, {{"device", "\x1b[8m" + std::string(100000, 'x')}}));
        return commit_state(c.task, e, state, r);
      });
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto r = run_command(veritrain_binary() + " verify --task " + c.task_file() + " --workdir " +
                           c.wd.string() + " --report " + (c.dir / "report").string() + " --key " +
                           (c.dir / "vkey").string(),
                       c.dir.path());
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos);
  EXPECT_NE(r.out.find("metadata device \"\\x1b[8mxxx"), std::string::npos)
      << r.out.substr(0, 2000);
  EXPECT_NE(r.out.find("(100004 bytes)"), std::string::npos) << r.out.substr(0, 2000);
  EXPECT_LT(r.out.size(), 20000u);
}

// The verifier judges by its own task file: a workdir whose task.json is broken or missing is
// still judged, by its log and snapshots.
TEST(ForgerCli, BrokenWorkdirTaskJsonDoesNotStopTheVerdict) {
  Cli c;
  const fs::path own_task = c.dir / "task.json";
  fs::copy_file(c.wd / "task.json", own_task);
  ASSERT_TRUE(write_file_atomic(c.wd / "task.json", "{ not json").ok());
  auto r = run_command(veritrain_binary() + " --json verify --task " + own_task.string() +
                           " --workdir " + c.wd.string() +
                           " --check-probability 1 --seed 01 --jobs 1 --report " +
                           (c.dir / "report").string() + " --provider-key " + provider_fp(),
                       c.dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["result"], "accepted");
  fs::remove(c.wd / "task.json");
  r = run_command(veritrain_binary() + " verify --task " + own_task.string() + " --workdir " +
                      c.wd.string() + " --check-probability 1 --seed 01 --jobs 1 --report " +
                      (c.dir / "report2").string(),
                  c.dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// A committed state that cannot be restored: verify rejects with a verdict, audit exits 1 with
// the finding that the next epoch cannot be replayed from it (neither is the auditor's input
// error).
TEST(ForgerCli, UnrestorableStateIsExitOneForVerifyAndAudit) {
  Cli c;
  Status s = reforge_workdir(c.wd, provider_key(),
                             [&](std::uint64_t e, CommitRecord& r, Bytes& state) -> Status {
                               if (e != 1) return {};
                               VT_ASSIGN_OR_RETURN(state, fill_tensor(state, "rng/cpu", 0xff));
                               return commit_state(c.task, e, state, r);
                             });
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto v = c.verify("--provider-key " + provider_fp());
  ASSERT_EQ(v.exit_code, 1) << v.out << v.err;
  EXPECT_NE(v.out.find("epoch 2: the committed state cannot be restored"), std::string::npos)
      << v.out;
  EXPECT_TRUE(fs::exists(c.dir / "report/verdict.json"));
  auto audit = run_command(veritrain_binary() + " audit --task " + c.task_file() + " --workdir " +
                               c.wd.string() + " --epoch 2 --provider-key " + provider_fp(),
                           c.dir.path());
  EXPECT_EQ(audit.exit_code, 1) << audit.out << audit.err;
  // The finding itself, on stdout, as signed evidence would state it: not an error.
  EXPECT_NE(audit.out.find("epoch 2 cannot be replayed: the state the provider stores for epoch 1"),
            std::string::npos)
      << audit.out;
  EXPECT_NE(audit.out.find("the committed state cannot be restored"), std::string::npos)
      << audit.out;
}

TEST(ForgerCli, TrustAnchorOnVerifyLogVerifyAndAudit) {
  Cli c;
  const SigningKey fresh = *SigningKey::generate();
  ASSERT_TRUE(reforge_workdir(c.wd, fresh, [](std::uint64_t, CommitRecord&, Bytes&) {
                return Status{};
              }).ok());
  // The provider's public key as a file (keygen's signing.pub.pem) works as well as its SHA-256.
  ASSERT_TRUE(
      write_file_atomic(c.dir / "provider.pub.pem", provider_key().public_key().to_pem()).ok());
  const std::string pem = (c.dir / "provider.pub.pem").string();

  auto v = c.verify("--provider-key " + pem);
  EXPECT_EQ(v.exit_code, 1) << v.out << v.err;
  EXPECT_NE(v.out.find("not by the provider key given with --provider-key"), std::string::npos)
      << v.out;
  EXPECT_TRUE(fs::exists(c.dir / "report/verdict.json"));

  auto lv = run_command(veritrain_binary() + " log verify --workdir " + c.wd.string() +
                            " --provider-key " + provider_fp(),
                        c.dir.path());
  EXPECT_EQ(lv.exit_code, 1) << lv.out << lv.err;
  auto lv_ok = run_command(veritrain_binary() + " log verify --workdir " + c.wd.string() +
                               " --provider-key " + fresh.public_key().fingerprint(),
                           c.dir.path());
  EXPECT_EQ(lv_ok.exit_code, 0) << lv_ok.out << lv_ok.err;

  auto audit = run_command(veritrain_binary() + " audit --task " + c.task_file() + " --workdir " +
                               c.wd.string() + " --epoch 1 --provider-key " + pem,
                           c.dir.path());
  EXPECT_EQ(audit.exit_code, 1) << audit.out << audit.err;

  // A malformed anchor is the verifier's own input: exit 2, before anything is judged.
  auto bad = c.verify("--provider-key not-a-key", "report-bad");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_FALSE(fs::exists(c.dir / "report-bad/verdict.json"));
}

TEST(ForgerCli, VerifierKeyPersistsInTheConfigFolder) {
  Cli c;
  auto first = c.verify("", "r1");
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  auto second = c.verify("", "r2");
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  const auto a = nlohmann::json::parse(first.out)["verifier"]["fingerprint"];
  const auto b = nlohmann::json::parse(second.out)["verifier"]["fingerprint"];
  EXPECT_EQ(a, b);
  EXPECT_EQ(mode_of(c.config()), 0700u);
  EXPECT_EQ(mode_of(c.config() / "signing.key.pem"), 0600u);
  EXPECT_FALSE(fs::exists(c.dir / "r1/verifier-keys"));  // no throwaway key beside the report
  // Every claimed loss of an exact-mode replay is marked verified.
  auto checks = nlohmann::json::parse(first.out)["checks"];
  ASSERT_EQ(checks.size(), 3u);
  for (const auto& check : checks)
    EXPECT_EQ(check["metrics"]["loss"]["status"], "verified") << check.dump();
}

}  // namespace
}  // namespace vt::adversary

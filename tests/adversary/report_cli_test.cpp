// Through the `veritrain` binary: `verify --reward --penalty --cost` sets p from the
// economics and says what it guarantees; report.html and the auditor's page, opened in headless
// Chromium, log nothing and fit 1280 px; a rejection names the audit command, which runs as
// printed. VT_SCREENSHOT_DIR=DIR keeps a PNG of each page there (docs/ holds the README's).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "common/process.h"
#include "protocol/log.h"
#include "tests/adversary/support.h"
#include "tests/verifier/chromium.h"
#include "verifier/report/html_page.h"

namespace vt::adversary {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::veritrain_binary;

struct CheatedWorkdir {
  testing::ScratchDir dir;
  Task task = tiny_task(43, 12, 1);
  fs::path wd = dir / "wd";
  std::vector<Digest> roots;  // committed per epoch
  explicit CheatedWorkdir(const CheatPlan& plan = {}) {
    auto run = write_workdir(task, wd, plan, provider_key());
    EXPECT_TRUE(run.ok()) << run.error().message;
    if (run.ok()) roots = run->roots;
  }
  // --json, when wanted, goes before the command (where every version of the CLI takes it).
  std::string verify(const std::string& flags, bool json = false) const {
    return veritrain_binary() + (json ? " --json" : "") + " verify --task " +
           (wd / "task.json").string() + " --workdir " + wd.string() +
           " --jobs 1 --seed 01 --provider-key " + provider_key().public_key().fingerprint() + " " +
           flags;
  }
};

// The page logs nothing, does not scroll sideways and breaks no word, on a desktop (1280 px)
// and on a phone (390 px).
void check_page(const fs::path& page, const fs::path& scratch, const std::string& keep_as) {
  if (!testing::have_program("chromium")) return;
  EXPECT_EQ(testing::console_in_chromium(page, scratch), "") << page;
  for (int width : {1280, 390}) {
    const testing::BrowserView view = testing::measured_in_chromium(page, scratch, width);
    EXPECT_EQ(view.inner_width, width);
    EXPECT_LE(view.scroll_width, view.inner_width) << page << " scrolls horizontally at " << width;
    EXPECT_EQ(view.broken_words, "") << page << " breaks these words at " << width << " px";
  }
  if (const char* out = std::getenv("VT_SCREENSHOT_DIR"); out != nullptr && *out != '\0') {
    EXPECT_TRUE(testing::screenshot(page, fs::path(out) / keep_as, scratch, 1150, 0.625));
    // The phone's view: the copy measured last, laid out 390 px wide in the narrowest window.
    const fs::path posed = scratch / ("measured-" + page.filename().string());
    const std::string narrow = fs::path(keep_as).stem().string() + "-390.png";
    EXPECT_TRUE(testing::screenshot(posed, fs::path(out) / narrow, scratch, 1400, 1.0,
                                    testing::kNarrowestWindow));
  }
}

// The rows of the report table whose caption starts with `caption`: the text of each row's
// first cell.
std::vector<std::string> first_cells(const std::string& html, const std::string& caption) {
  std::vector<std::string> out;
  const std::size_t at = html.find("<caption>" + caption);
  if (at == std::string::npos) return out;
  const std::size_t end = html.find("</table>", at);
  for (std::size_t row = html.find("<tr><td>", at); row < end;
       row = html.find("<tr><td>", row + 1)) {
    const std::size_t from = row + 8;
    out.push_back(html.substr(from, html.find("</td>", from) - from));
  }
  return out;
}

TEST(ReportCli, EconomicsSetsTheCheckProbabilityAndTheVerdictSaysWhatItGuarantees) {
  CheatedWorkdir w;
  auto r = run_command(
      w.verify("--reward 100 --penalty 50 --cost 120 --report " + (w.dir / "report").string(),
               true),
      w.dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& d = j["challenge"]["derivation"];
  EXPECT_EQ(d["method"], "economics");
  EXPECT_NEAR(d["p"].get<double>(), 1.0 - std::pow(0.2, 1.0 / 12.0), 1e-12);  // ρ = 120/150
  EXPECT_EQ(d["economics"]["cost_basis"], "given");
  EXPECT_NE(d["guarantee"].get<std::string>().find("does not pay"), std::string::npos);
  // The signed verdict carries the same derivation.
  Result<std::string> signed_text = read_text_file(w.dir / "report/verdict.json");
  ASSERT_TRUE(signed_text.ok());
  EXPECT_NE(signed_text->find("\"method\":\"economics\""), std::string::npos);
  Result<std::string> html = read_text_file(w.dir / "report/report.html");
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find(
                "with R = 100, D = 50 and K = 120, cheating on any number of epochs does not pay."),
            std::string::npos);
  check_page(w.dir / "report/report.html", w.dir.path(), "report-accepted.png");

  // Human output names the policy; without --cost, K is measured.
  r = run_command(w.verify("--reward 1000 --penalty 500 --report " + (w.dir / "r2").string()),
                  w.dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("policy: p = "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("from --reward 1000 --penalty 500 and K = "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(estimated: N x epoch seconds"), std::string::npos) << r.out;

  // Inputs that cannot be made safe, or that contradict each other, are the verifier's error.
  r = run_command(
      w.verify("--reward 10 --penalty 10 --cost 50 --report " + (w.dir / "r3").string()),
      w.dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--reward/--penalty: R + D = 20 is not more than the honest cost K = 50"),
            std::string::npos)
      << r.err;
  r = run_command(
      w.verify("--reward 10 --check-probability 0.5 --report " + (w.dir / "r4").string()),
      w.dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run_command(w.verify("--cost 10 --report " + (w.dir / "r5").string()), w.dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run_command(w.verify(""), w.dir.path());  // neither --report nor --resume
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("verify needs --report DIR (or --resume DIR)"), std::string::npos) << r.err;
}

TEST(ReportCli, ARejectionNamesTheAuditCommandAndItsPageReadsInABrowser) {
  CheatPlan plan;
  plan.cheats[5] = Strategy::kLearningRate;
  CheatedWorkdir w(plan);
  auto r = run_command(w.verify("--check-probability 1 --report " + (w.dir / "report").string()),
                       w.dir.path());
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  std::string next;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("next: ", 0) == 0) next = line.substr(6);
  }
  const std::string expected = "veritrain audit --task " + (w.wd / "task.json").string() +
                               " --workdir " + w.wd.string() + " --epoch 5 --provider-key " +
                               provider_key().public_key().fingerprint() +
                               " --evidence evidence-epoch-5.json --report audit-epoch-5";
  ASSERT_EQ(next, expected) << r.out;
  Result<std::string> html = read_text_file(w.dir / "report/report.html");
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find("<pre>" + expected + "</pre>"), std::string::npos);
  check_page(w.dir / "report/report.html", w.dir.path(), "report.png");

  // The command runs as printed (from the folder the verifier ran in).
  r = run_command("cd " + w.dir.path().string() + " && " + veritrain_binary() +
                      next.substr(std::string("veritrain").size()),
                  w.dir.path());
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // the replay diverges
  EXPECT_NE(r.out.find("epoch 5 first diverges between step 0 and step 1 of 3"), std::string::npos)
      << r.out;
  ASSERT_TRUE(fs::exists(w.dir / "evidence-epoch-5.json"));
  Result<std::string> page = read_text_file(w.dir / "audit-epoch-5/report.html");
  ASSERT_TRUE(page.ok());
  EXPECT_NE(page->find("DIVERGES"), std::string::npos);
  EXPECT_NE(page->find("--check evidence-epoch-5.json"), std::string::npos);
  check_page(w.dir / "audit-epoch-5/report.html", w.dir.path(), "evidence.png");
}

// The corrupted-workdir walk: what verify, an audit of every failed epoch, `log verify` and
// report.html say about one workdir agree. Verify fails exactly the epochs whose own stored state
// or start state `log verify` finds unusable; each epoch verify failed without replaying is said
// to be "not replayed" and is not counted as a replay; every failed epoch audits into signed
// evidence (exit 1) that re-checks; the page shows every failure the verdict signed.
void corrupted_workdir_walk(const CheatedWorkdir& w, const std::string& verify_out,
                            const nlohmann::json& verdict, const std::string& html) {
  const std::string key = provider_key().public_key().fingerprint();
  auto listed = run_command(veritrain_binary() + " --json log verify --workdir " + w.wd.string() +
                                " --provider-key " + key,
                            w.dir.path());
  ASSERT_EQ(listed.exit_code, 1) << listed.out << listed.err;
  const nlohmann::json found = nlohmann::json::parse(listed.out);
  std::set<std::uint64_t> unusable;
  for (std::size_t e = 0; e < found["epochs"].size(); ++e)
    if (found["epochs"][e].contains("problem")) unusable.insert(e);
  ASSERT_FALSE(unusable.empty()) << listed.out;

  std::size_t not_replayed = 0;
  for (const nlohmann::json& c : verdict["checks"]) {
    const std::uint64_t e = c["epoch"].get<std::uint64_t>();
    const bool expect_fail = unusable.count(e) || unusable.count(e - 1);
    EXPECT_EQ(c["passed"].get<bool>(), !expect_fail) << "epoch " << e << ": " << c.dump();
    if (c["passed"].get<bool>()) continue;
    // Replayed exactly when its start state was usable.
    EXPECT_EQ(c["replayed"].get<bool>(), !unusable.count(e - 1)) << c.dump();
    const std::string heading = "  epoch " + std::to_string(e) + "  FAILED  ";
    if (!c["replayed"].get<bool>()) {
      ++not_replayed;
      EXPECT_NE(verify_out.find(heading + "not replayed"), std::string::npos) << verify_out;
    }
    for (const nlohmann::json& f : c["failures"])
      EXPECT_NE(html.find(verifier::html_escape(f.get<std::string>())), std::string::npos) << f;

    const std::string evidence =
        (w.dir / ("walk-evidence-" + std::to_string(e) + ".json")).string();
    std::string audit_command = veritrain_binary();
    audit_command.append(" audit --task ").append((w.wd / "task.json").string());
    audit_command.append(" --workdir ")
        .append(w.wd.string())
        .append(" --provider-key ")
        .append(key);
    audit_command.append(" --epoch ")
        .append(std::to_string(e))
        .append(" --evidence ")
        .append(evidence);
    auto audit = run_command(audit_command, w.dir.path());
    EXPECT_EQ(audit.exit_code, 1) << audit.out << audit.err;
    EXPECT_EQ(audit.err.find("error"), std::string::npos) << audit.err;
    EXPECT_NE(audit.out.find(unusable.count(e - 1)
                                 ? "epoch " + std::to_string(e) +
                                       " cannot be replayed: the state the "
                                       "provider stores for epoch " +
                                       std::to_string(e - 1)
                                 : "epoch " + std::to_string(e) + " replays bit-identically"),
              std::string::npos)
        << audit.out;
    auto recheck =
        run_command(veritrain_binary() + " audit --task " + (w.wd / "task.json").string() +
                        " --workdir " + w.wd.string() + " --check " + evidence,
                    w.dir.path());
    EXPECT_EQ(recheck.exit_code, 0) << recheck.out << recheck.err;
  }
  EXPECT_GT(not_replayed, 0u);
  EXPECT_NE(verify_out.find(std::to_string(not_replayed) +
                            " could not be replayed from the provider's evidence"),
            std::string::npos)
      << verify_out;
  EXPECT_EQ(verify_out.find("reason: epoch"), std::string::npos) << "said under each epoch";
}

// The provider trained honestly but the state it stores for epoch 5 is corrupt. The verdict keeps
// every epoch's claims as committed, the report lists every challenged epoch once, and the
// dispute path agrees with the verifier: the audit of epoch 5 proves the work and names the
// corrupt state (exit 1), the audit of epoch 6 cannot start from it and says so in signed
// evidence (exit 1, not a caller error), and `log verify` finds the same epochs.
TEST(ReportCli, ACorruptStoredStateIsRejectedWithItsClaimsAndTheAuditAgrees) {
  CheatedWorkdir w;
  ASSERT_EQ(w.roots.size(), 13u);
  const fs::path stored = w.wd / "snapshots" / (hex_encode(w.roots[5]) + ".vtc");
  Result<Bytes> bytes = read_file(stored);
  ASSERT_TRUE(bytes.ok());
  (*bytes)[bytes->size() / 2] ^= 0x10;
  ASSERT_TRUE(write_file_atomic(stored, *bytes).ok());

  auto r = run_command(w.verify("--check-probability 1 --report " + (w.dir / "report").string()),
                       w.dir.path());
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  Result<LogFile> log = read_log(w.wd / "commitments.log");
  ASSERT_TRUE(log.ok());
  Result<std::string> signed_text = read_text_file(w.dir / "report/verdict.json");
  ASSERT_TRUE(signed_text.ok());
  const nlohmann::json verdict = nlohmann::json::parse(*signed_text)["verdict"];
  ASSERT_EQ(verdict["checks"].size(), 12u);
  for (const nlohmann::json& c : verdict["checks"]) {
    const std::uint64_t e = c["epoch"].get<std::uint64_t>();
    EXPECT_EQ(c["metrics"]["loss"]["claimed"].get<double>(), log->records.at(e).record.metrics.loss)
        << "epoch " << e;
    if (e <= 6) {
      EXPECT_EQ(c["passed"].get<bool>(), e < 5) << c.dump();
    }
  }
  Result<std::string> html = read_text_file(w.dir / "report/report.html");
  ASSERT_TRUE(html.ok());
  std::vector<std::string> every;
  for (int e = 1; e <= 12; ++e) every.push_back(std::to_string(e));
  EXPECT_EQ(first_cells(*html, "Each challenged epoch"), every);
  // The next step fits the reason: evidence, not a diverging replay.
  EXPECT_NE(html->find("failed on its evidence, not on its work"), std::string::npos);
  EXPECT_EQ(html->find("locates the first step"), std::string::npos);
  const std::vector<std::string> compared = first_cells(*html, "What each replay was compared");
  for (const std::string& e : every) {
    EXPECT_NE(std::find(compared.begin(), compared.end(), e), compared.end()) << "epoch " << e;
  }
  check_page(w.dir / "report/report.html", w.dir.path(), "report-corrupt.png");

  std::string next;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("next: ", 0) == 0) next = line.substr(6);
  }
  ASSERT_NE(next.find(" --epoch 5 "), std::string::npos) << r.out;
  auto audit = run_command("cd " + w.dir.path().string() + " && " + veritrain_binary() +
                               next.substr(std::string("veritrain").size()),
                           w.dir.path());
  EXPECT_EQ(audit.exit_code, 1) << audit.out << audit.err;
  EXPECT_NE(audit.out.find("epoch 5 replays bit-identically"), std::string::npos) << audit.out;
  EXPECT_NE(audit.out.find("the state the provider stores for it is unusable"), std::string::npos)
      << audit.out;
  Result<std::string> page = read_text_file(w.dir / "audit-epoch-5/report.html");
  ASSERT_TRUE(page.ok());
  EXPECT_NE(page->find("STORED STATE UNUSABLE"), std::string::npos);
  EXPECT_EQ(page->find("#f0ad4e\"><title>"), std::string::npos) << "no divergence is drawn";
  // The evidence re-checks, stored-state finding included.
  auto recheck = run_command(veritrain_binary() + " audit --task " + (w.wd / "task.json").string() +
                                 " --workdir " + w.wd.string() + " --check " +
                                 (w.dir / "evidence-epoch-5.json").string(),
                             w.dir.path());
  EXPECT_EQ(recheck.exit_code, 0) << recheck.out << recheck.err;

  corrupted_workdir_walk(w, r.out, verdict, *html);
}

// One edited loss in commitments.log: the signature fault is the one reason, the key that was
// given is shown as given (not "unread"), no log head of zeros stands in the verdict, the
// challenged epochs are one note rather than a reason each, and the next step is a command that
// runs, with this workdir and key in it.
TEST(ReportCli, AnEditedLogLineIsOneReasonAndTheNextStepIsARealCommand) {
  CheatedWorkdir w;
  Result<Bytes> log = read_file(w.wd / "commitments.log");
  ASSERT_TRUE(log.ok());
  std::string text(log->begin(), log->end());
  std::size_t line = 0;
  for (int i = 0; i < 3; ++i) line = text.find('\n', line) + 1;  // the record of epoch 3
  const std::size_t at = text.find("\"loss\":", line) + 8;
  ASSERT_LT(at, text.find('\n', line));
  text[at] = text[at] == '1' ? '2' : '1';
  ASSERT_TRUE(write_file_atomic(w.wd / "commitments.log", as_bytes(text)).ok());

  auto r = run_command(w.verify("--report " + (w.dir / "report").string()), w.dir.path());
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  const std::string key = provider_key().public_key().fingerprint();
  EXPECT_NE(r.out.find("provider key " + key + " (given with --provider-key"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("(unread)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("never checked"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("note: challenged epochs not checked, because the log failed first"),
            std::string::npos)
      << r.out;
  const std::string next =
      "veritrain log verify --workdir " + w.wd.string() + " --provider-key " + key;
  EXPECT_NE(r.out.find("next: " + next + "\n"), std::string::npos) << r.out;
  Result<std::string> signed_text = read_text_file(w.dir / "report/verdict.json");
  ASSERT_TRUE(signed_text.ok());
  const nlohmann::json verdict = nlohmann::json::parse(*signed_text)["verdict"];
  EXPECT_EQ(verdict["reasons"].size(), 1u) << verdict["reasons"].dump();
  EXPECT_EQ(verdict["log_head"], "");
  EXPECT_EQ(verdict["provider"]["given"], key);
  Result<std::string> html = read_text_file(w.dir / "report/report.html");
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find("<pre>" + next + "</pre>"), std::string::npos);
  EXPECT_EQ(html->find("--workdir DIR"), std::string::npos);
  // The next step runs as printed and names the same record.
  auto followed =
      run_command(veritrain_binary() + next.substr(std::string("veritrain").size()), w.dir.path());
  EXPECT_EQ(followed.exit_code, 1) << followed.out << followed.err;
  EXPECT_NE((followed.out + followed.err).find("epoch 3"), std::string::npos)
      << followed.out << followed.err;
}

}  // namespace
}  // namespace vt::adversary

namespace vt::adversary {
namespace {

std::size_t judged_files(const fs::path& dir) {
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    n += name.starts_with("epoch-") && name.ends_with(".json") ? 1 : 0;
  }
  return n;
}

std::size_t count_lines(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(VerifyResume, AKilledVerifyContinuesWithTheSameChallengesAndReplaysOnlyTheRest) {
  testing::ScratchDir dir;
  Task task = tiny_task(47, 10, 0);
  task.model.options["hidden"] = 512;  // slow enough that the kill lands between replays
  task.steps_per_epoch = 40;
  const fs::path wd = dir / "wd";
  ASSERT_TRUE(write_workdir(task, wd, {}, provider_key()).ok());
  const fs::path report = dir / "report";
  const fs::path state = report / ".verify-state";
  std::vector<std::string> argv = {veritrain_binary(),
                                   "verify",
                                   "--task",
                                   (wd / "task.json").string(),
                                   "--workdir",
                                   wd.string(),
                                   "--jobs",
                                   "1",
                                   "--check-probability",
                                   "0.8",
                                   "--key",
                                   (dir / "vkey").string(),
                                   "--provider-key",
                                   provider_key().public_key().fingerprint()};
  std::vector<std::string> first = argv;
  first.insert(first.end(), {"--report", report.string()});
  std::size_t before = 0;
  {
    auto child = ChildProcess::spawn(first, dir / "first.log");
    ASSERT_TRUE(child.ok());
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (judged_files(state) < 2 && child->running() &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    child->terminate();  // the interruption: SIGTERM, which verify does not catch
    before = judged_files(state);
  }
  const std::string first_log = *read_text_file(dir / "first.log");
  ASSERT_FALSE(fs::exists(report / "verdict.json"))
      << "the first run finished before it was killed\n"
      << first_log;
  ASSERT_TRUE(fs::exists(state / "state.json")) << first_log;
  ASSERT_GE(before, 2u) << first_log;
  EXPECT_EQ(fs::status(state).permissions() & fs::perms::all,
            fs::perms::owner_all);  // sealed: 0700

  std::string cmd = veritrain_binary() + " --json";
  for (std::size_t i = 1; i < argv.size(); ++i) cmd += " " + argv[i];
  auto r = run_command(cmd + " --resume " + report.string(), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  std::string drawn;
  for (const auto& e : j["challenge"]["challenged"])
    drawn += (drawn.empty() ? "" : ", ") + std::to_string(e.get<int>());
  // The same sealed challenges the interrupted run announced, and a seed the verdict keeps secret.
  EXPECT_NE(first_log.find("challenging epochs " + drawn + " (p = "), std::string::npos)
      << drawn << "\n"
      << first_log;
  EXPECT_TRUE(j["challenge"]["seed"].is_null());
  const std::size_t challenged = j["challenge"]["challenged"].size();
  EXPECT_EQ(j["checks"].size(), challenged);
  EXPECT_EQ(j["result"], "accepted");
  EXPECT_NE(r.err.find("resuming: " + std::to_string(before) + " of " + std::to_string(challenged)),
            std::string::npos)
      << r.err;
  EXPECT_EQ(count_lines(r.err, "judged before the interruption)"), before) << r.err;
  EXPECT_EQ(count_lines(r.err, "replay matches ("), challenged)
      << r.err;  // judged ones are said, not replayed
  EXPECT_EQ(count_lines(r.err, " s)\n"), challenged - before) << r.err;  // replayed now
  EXPECT_FALSE(fs::exists(state));  // the seed goes once the verdict is written

  // Nothing left to resume, and flags that cannot be honoured, are the verifier's own errors.
  r = run_command(cmd + " --resume " + report.string(), dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("nothing to resume"), std::string::npos) << r.out << r.err;
  r = run_command(cmd + " --online --resume " + report.string(), dir.path());
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace vt::adversary

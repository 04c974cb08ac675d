// report.html and the evidence page read by a person: the one-sentence verdict, headings on
// every table, units on byte counts, exact mode in words, a loss axis that respects the data,
// the next command after a rejection, and escaping of everything a provider controls.
#include <gtest/gtest.h>

#include <regex>

#include "common/text.h"
#include "test_records.h"
#include "verifier/audit/evidence_page.h"
#include "verifier/report/html_report.h"
#include "verifier/report/report_folder.h"

namespace vt::verifier {
namespace {

Verdict verdict(bool fail_epoch_3, fp::CompareMode mode = fp::CompareMode::kExact) {
  Verdict v;
  v.task_id = std::string(64, 'a');
  v.log_head = std::string(64, 'b');
  v.provider_key = std::string(64, 'c');
  v.epochs = 20;
  v.source = "workdir /tmp/<w>";
  PolicyRequest r;
  r.economics = EconomicsRequest{100, 50, 120, "given"};
  Result<ChallengeRandom> rnd = ChallengeRandom::from_seed_hex("c0ffee");
  v.plan = plan_challenges(*derive_probability(r, 20), {}, *rnd);
  v.plan.challenged = {3, 11};  // fixed so that the test does not depend on the draws
  for (std::uint64_t e : v.plan.challenged) {
    EpochCheck c;
    c.epoch = e;
    c.bytes_fetched = 3 * 1024 * 1024 + 512 * 1024;
    fp::Comparison f;
    f.mode = mode;
    f.compared = 512;
    f.thresholds.rel_l2 = 1e-3;
    f.allowed_mismatches = mode == fp::CompareMode::kExact ? 0 : 5;
    const bool bad = fail_epoch_3 && e == 3;
    f.mismatches = bad ? 40 : 0;
    f.match = !bad;
    c.fingerprint = f;
    c.replayed = true;
    c.passed = !bad;
    c.claimed_loss = 0.5;
    c.replay_loss = 0.5;
    c.loss_verified = !bad && mode == fp::CompareMode::kExact;
    if (bad) c.failures.push_back("epoch 3: replay differs from the commitment <x>");
    v.checks.push_back(c);
  }
  v.bytes_fetched = 7 * 1024 * 1024;
  finalize_verdict(v);
  return v;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ReportPage, OneSentenceSaysWhatWasProven) {
  const Verdict ok = verdict(false);
  EXPECT_EQ(
      verdict_sentence(ok),
      "Accepted: 2 of 20 epochs replayed, each matching the provider's commitments; a provider "
      "cheating on "
      "10 % of epochs (2 of 20) is caught with probability at least " +
          html::num(ok.plan.derivation.confidence) +
          "; with R = 100, D = 50 and K = 120, cheating on any number of epochs does not pay.");
  EXPECT_EQ(verdict_sentence(verdict(true)),
            "Rejected: 2 of 20 epochs replayed, 1 failed; epoch 3: replay differs from the "
            "commitment <x>.");
  const std::string html = render_html_report(ok, std::vector<double>(21, 1.0), "vkey");
  EXPECT_NE(html.find("<p class=\"lead\">Accepted: 2 of 20 epochs replayed"), std::string::npos);
  EXPECT_NE(html.find(html_escape(ok.plan.derivation.guarantee)), std::string::npos);
  EXPECT_NE(html.find("from --reward 100 --penalty 50 and K = 120 (given)"), std::string::npos);
}

// Each epoch says what was checked and what failed, and the headline counts replays as
// replays: an epoch whose evidence was unusable was challenged, never re-run.
TEST(ReportPage, AnEpochWithUnusableEvidenceIsNotCountedAsReplayed) {
  Verdict v = verdict(false);
  EpochCheck& start_unusable = v.checks[0];  // epoch 3
  start_unusable.replayed = false;
  start_unusable.fingerprint.reset();
  start_unusable.replay_loss.reset();
  start_unusable.loss_verified = false;
  start_unusable.passed = false;
  start_unusable.failures = {"epoch 3: the snapshot committed for epoch 2 is unusable: <why>"};
  EpochCheck& after_unusable = v.checks[1];  // epoch 11: replayed to the commitment
  after_unusable.passed = false;
  after_unusable.failures = {"epoch 11: the committed snapshot is unusable: <why>"};
  finalize_verdict(v);
  EXPECT_EQ(verdict_sentence(v),
            "Rejected: 2 of 20 epochs challenged, 1 replayed, 2 failed (1 could not be replayed "
            "from the provider's evidence); epoch 3: the snapshot committed for epoch 2 is "
            "unusable: <why> (and 1 more reason).");
  const std::string s = verdict_summary(v, "");
  EXPECT_NE(s.find("  epoch 3  FAILED  not replayed, 3.50 MiB fetched\n"
                   "    failed: the snapshot committed for epoch 2 is unusable: <why>\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("  epoch 11  FAILED  replayed in 0.00 s, 3.50 MiB fetched\n"
                   "    fingerprint bit-identical over 512 values\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("    failed: the committed snapshot is unusable: <why>\n"), std::string::npos)
      << s;
  EXPECT_EQ(s.find("reason: epoch"), std::string::npos) << s;  // said once, under the epoch
  const std::string html = render_html_report(v, {}, "");
  EXPECT_NE(html.find("nothing: the epoch was not replayed"), std::string::npos);
}

TEST(ReportPage, EveryTableHasAHeadingAndBytesHaveUnits) {
  const std::string html = render_html_report(verdict(false), std::vector<double>(21, 1.0), "vkey");
  EXPECT_GE(count(html, "<table>"), 5u);
  EXPECT_EQ(count(html, "<table>"), count(html, "<caption>"));
  EXPECT_NE(html.find("3.50 MiB"), std::string::npos);  // per check
  EXPECT_NE(html.find("7.00 MiB"), std::string::npos);  // in total
  EXPECT_EQ(html.find("3670016"), std::string::npos);
  EXPECT_NE(html.find("verifier key (SHA-256)"), std::string::npos);
  EXPECT_NE(html.find(std::string(64, 'c')), std::string::npos);  // the provider's key
  EXPECT_EQ(size_text(1023), "1023 B");
  EXPECT_EQ(size_text(1536), "1.50 KiB");
  EXPECT_EQ(size_text(5.0 * (1ull << 30)), "5.00 GiB");
}

TEST(ReportPage, ExactModeSaysBitIdenticalNotZeroOverZero) {
  const std::string exact = render_html_report(verdict(true), std::vector<double>(21, 1.0));
  EXPECT_NE(exact.find("bit-identical"), std::string::npos);
  EXPECT_NE(exact.find("40 differ (none allowed)"), std::string::npos);
  EXPECT_EQ(exact.find("0 / 0"), std::string::npos);
  EXPECT_EQ(exact.find("of 0 allowed"), std::string::npos);
  EXPECT_EQ(exact.find("viewBox=\"0 0 164 14\""), std::string::npos);  // no gauges
  EXPECT_NE(exact.find("bit for bit (exact)"), std::string::npos);
  EXPECT_NE(exact.find("none: every bit must match"), std::string::npos);
  Verdict portable = verdict(true);
  portable.committed_environment["arithmetic"] = "portable";
  const std::string portable_html = render_html_report(portable, {});
  EXPECT_NE(portable_html.find("bit for bit (portable)"), std::string::npos);
  EXPECT_EQ(portable_html.find(">exact<"), std::string::npos);
  const std::string tolerance = render_html_report(verdict(true, fp::CompareMode::kTolerance), {});
  EXPECT_NE(tolerance.find("40 of 5 allowed"), std::string::npos);
  EXPECT_NE(tolerance.find("viewBox=\"0 0 164 14\""), std::string::npos);
}

// The y tick labels of the loss chart.
std::vector<double> loss_ticks(const std::string& html) {
  const std::size_t from = html.find("aria-label=\"mean training loss per epoch\"");
  const std::size_t to = html.find("</svg>", from);
  const std::string svg = html.substr(from, to - from);
  std::vector<double> out;
  const std::regex tick("text-anchor=\"end\">([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tick); it != std::sregex_iterator();
       ++it) {
    out.push_back(std::stod((*it)[1]));
  }
  return out;
}

TEST(ReportPage, LossAxisIsLabelledAndStaysAboveZeroUnlessTheDataDoesNot) {
  std::vector<double> loss = {NAN};
  for (int e = 1; e <= 20; ++e) loss.push_back(2.3 / e);  // 0.115 .. 2.3: padding would cross zero
  std::string html = render_html_report(verdict(false), loss);
  EXPECT_NE(html.find(">mean training loss</text>"), std::string::npos);
  EXPECT_NE(html.find(">epoch</text>"), std::string::npos);
  std::vector<double> ticks = loss_ticks(html);
  ASSERT_GE(ticks.size(), 3u);
  EXPECT_EQ(*std::min_element(ticks.begin(), ticks.end()), 0.0);
  for (double t : ticks) EXPECT_LE(t, 2.5);
  for (double& l : loss) l -= 1.0;  // now some are negative: the axis follows them
  ticks = loss_ticks(render_html_report(verdict(false), loss));
  EXPECT_LT(*std::min_element(ticks.begin(), ticks.end()), 0.0);
  for (std::size_t e = 1; e < loss.size(); ++e)
    loss[e] = 5.0 + 0.01 * static_cast<double>(e);  // far from zero
  ticks = loss_ticks(render_html_report(verdict(false), loss));
  EXPECT_GE(*std::min_element(ticks.begin(), ticks.end()), 4.9);
}

TEST(ReportPage, RejectionNamesTheAuditCommandToRunNext) {
  const Verdict bad = verdict(true);
  const std::string cmd = next_step_command(bad, "/tmp/my task.json", "/srv/wd");
  EXPECT_EQ(
      cmd,
      "veritrain audit --task '/tmp/my task.json' --workdir /srv/wd --epoch 3 --provider-key " +
          std::string(64, 'c') + " --evidence evidence-epoch-3.json --report audit-epoch-3");
  EXPECT_EQ(next_step_command(bad, "t.json", ""),
            "veritrain audit --task t.json --workdir PROVIDER_WORKDIR --epoch 3 --provider-key " +
                std::string(64, 'c') + " --evidence evidence-epoch-3.json --report audit-epoch-3");
  Verdict ok = verdict(false);
  ok.accepted = true;
  EXPECT_EQ(next_step_command(ok, "t.json", "/srv/wd"), "");
  // Rejected for its log alone: the next step is the command that names the log's problems,
  // with the key that was pinned even though no record could be read.
  Verdict log_only = verdict(false);
  log_only.checks.clear();
  log_only.provider_key.clear();
  log_only.provider_key_given = std::string(64, 'd');
  log_only.log_failures = {"the commitment log: epoch 3 (line 4): signature does not verify"};
  finalize_verdict(log_only);
  EXPECT_EQ(next_step_command(log_only, "t.json", "/srv/wd"),
            "veritrain log verify --workdir /srv/wd --provider-key " + std::string(64, 'd'));
  EXPECT_EQ(log_only.reasons.size(), 1u);  // not one more per challenged epoch never checked
  const std::string summary = verdict_summary(log_only, "");
  EXPECT_NE(summary.find("provider key " + std::string(64, 'd') + " (given with --provider-key"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("challenged epochs not checked, because the log failed first: 3, 11"),
            std::string::npos)
      << summary;
  const std::string log_html =
      render_html_report(log_only, {}, "", next_step_command(log_only, "t.json", "/srv/wd"));
  EXPECT_NE(log_html.find("veritrain log verify --workdir /srv/wd --provider-key"),
            std::string::npos);
  EXPECT_EQ(log_html.find("--workdir DIR"), std::string::npos);
  const std::string html = render_html_report(bad, {}, "", cmd);
  EXPECT_NE(html.find("<h2>What to do next</h2>"), std::string::npos);
  EXPECT_NE(
      html.find(
          "<pre>veritrain audit --task &#39;/tmp/my task.json&#39; --workdir /srv/wd --epoch 3"),
      std::string::npos);
  EXPECT_NE(html.find("replay differs from the commitment &lt;x&gt;"), std::string::npos);
  EXPECT_EQ(render_html_report(verdict(false), {}, "", "").find("What to do next"),
            std::string::npos);
}

TEST(EvidencePage, SaysWhereTheReplayDivergesAndEscapesTensorNames) {
  AuditFinding f;
  f.epoch = 4;
  f.steps = 12;
  f.trail_interval = 3;
  f.last_matching_step = 6;
  f.first_diverging_step = 9;
  f.differences.push_back({"w<img src=x onerror=alert(1)>", 7, 32, {3, 17}});
  f.summary = "epoch 4 first diverges between step 6 and step 9 of 12";
  EvidencePageInfo info{
      std::string(64, 'd'), "task.json", "/srv/<wd>", std::string(64, 'e'), false, "", ""};
  const std::string html = render_evidence_page(f, info);
  EXPECT_NE(html.find("DIVERGES"), std::string::npos);
  EXPECT_NE(
      html.find("<p class=\"lead\">epoch 4 first diverges between step 6 and step 9 of 12.</p>"),
      std::string::npos);
  EXPECT_NE(html.find("w&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("/srv/&lt;wd&gt;"), std::string::npos);
  EXPECT_NE(html.find("the divergence lies in steps 6..9"), std::string::npos);
  EXPECT_NE(html.find("training step within epoch 4"), std::string::npos);
  EXPECT_NE(html.find("Sampled values that differ at step 9"), std::string::npos);
  EXPECT_NE(html.find("--epoch 4 --evidence evidence-epoch-4.json"),
            std::string::npos);  // no evidence yet: how to get it
  EXPECT_EQ(count(html, "<table>"), count(html, "<caption>"));
  info.evidence_file = "ev.json";
  info.auditor_key = std::string(64, 'a');
  const std::string signed_page = render_evidence_page(f, info);
  EXPECT_NE(signed_page.find("--check ev.json"), std::string::npos);
  EXPECT_NE(signed_page.find(std::string(64, 'a')), std::string::npos);
}

}  // namespace
}  // namespace vt::verifier

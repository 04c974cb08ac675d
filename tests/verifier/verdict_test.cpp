// Verdicts: acceptance rules, the signed file format and its checks, the summary and the HTML
// report's content and escaping.
#include "verifier/report/verdict.h"

#include <gtest/gtest.h>

#include <limits>

#include "common/file_io.h"
#include "test_records.h"
#include "tests/test_util.h"
#include "verifier/report/html_report.h"

namespace vt::verifier {
namespace {

// metrics.loss of each record, indexed by epoch: what a report plots.
std::vector<double> losses_from_log(std::span<const SignedRecord> records) {
  std::vector<double> loss;
  for (const SignedRecord& r : records) loss.push_back(r.record.metrics.loss);
  return loss;
}

fp::Comparison comparison(std::uint64_t mismatches, double rel_l2, bool match) {
  fp::Comparison c;
  c.mode = fp::CompareMode::kTolerance;
  c.thresholds.rel_l2 = 1e-3;
  c.thresholds.max_outlier_fraction = 0.01;
  c.compared = 1024;
  c.allowed_mismatches = 10;
  c.mismatches = mismatches;
  c.rel_l2 = rel_l2;
  c.max_abs_diff = 1e-4;
  c.match = match;
  return c;
}

Verdict sample_verdict(bool tampered_epoch_3) {
  Verdict v;
  v.task_id = std::string(64, 'a');
  v.log_head = std::string(64, 'b');
  v.epochs = 6;
  v.source = "workdir /tmp/<w>";
  v.started = "2026-01-01T00:00:00.000Z";
  PolicyRequest r;
  r.confidence = 0.9;
  r.cheat_fraction = 0.5;
  Result<ProbabilityDerivation> d = derive_probability(r, 6);
  Result<ChallengeRandom> rnd = ChallengeRandom::from_seed_hex("c0ffee");
  v.plan = plan_challenges(*d, std::vector<double>{0.5, 0.3, 0.25, 0.2, 2.0, 0.15}, *rnd);
  v.plan.challenged = {3, 5};  // fixed here so the test does not depend on the draws
  for (std::uint64_t e : v.plan.challenged) {
    EpochCheck c;
    c.epoch = e;
    c.bytes_fetched = 4096;
    c.replay_seconds = 1.5;
    const bool bad = tampered_epoch_3 && e == 3;
    c.fingerprint = comparison(bad ? 600 : 0, bad ? 0.7 : 1e-6, !bad);
    c.passed = !bad;
    if (bad)
      c.failures.push_back(
          "epoch 3: replay differs from the committed fingerprint in 600 of 1024 values");
    c.replay_notes.push_back("replayed with 2 threads, committed with 1 <tolerance>");
    v.checks.push_back(c);
  }
  v.bytes_fetched = 8192;
  return v;
}

TEST(Verdict, AcceptsOnlyWhenEveryChallengedEpochPassed) {
  Verdict v = sample_verdict(false);
  finalize_verdict(v);
  EXPECT_TRUE(v.accepted);
  EXPECT_TRUE(v.reasons.empty());
  EXPECT_FALSE(v.finished.empty());

  v = sample_verdict(true);
  finalize_verdict(v);
  EXPECT_FALSE(v.accepted);
  ASSERT_EQ(v.reasons.size(), 1u);
  EXPECT_NE(v.reasons[0].find("epoch 3"), std::string::npos);

  v = sample_verdict(false);
  v.checks.pop_back();  // epoch 5 challenged but its check is missing
  finalize_verdict(v);
  EXPECT_FALSE(v.accepted);
  EXPECT_NE(v.reasons.at(0).find("epoch 5: challenged but never checked"), std::string::npos);

  v = sample_verdict(false);
  v.log_failures.push_back("log: task_id differs from the task's");
  finalize_verdict(v);
  EXPECT_FALSE(v.accepted);

  v = sample_verdict(false);
  v.plan.challenged.clear();
  v.checks.clear();
  finalize_verdict(v);
  EXPECT_FALSE(v.accepted);
}

// An epoch whose two replays here differ holds nothing against the provider: without a failure
// elsewhere the verdict is inconclusive, with one it is rejected for that failure alone.
TEST(Verdict, AnEpochWhoseReplaysDifferIsInconclusiveNeverARejection) {
  auto unreproduced = [](Verdict& v) {
    EpochCheck& c = v.checks.front();  // epoch 3
    c.passed = false;
    c.replayed = true;
    c.failures.clear();
    c.second_replay_root = Digest{};
    c.irreproducible = "two replays of epoch 3 on this machine differ from each other (tensor w)";
  };
  Verdict v = sample_verdict(true);
  unreproduced(v);
  finalize_verdict(v);
  EXPECT_FALSE(v.accepted);
  EXPECT_TRUE(v.inconclusive);
  EXPECT_TRUE(v.reasons.empty());
  EXPECT_EQ(verdict_result(v), "inconclusive");
  const std::string sentence = verdict_sentence(v);
  EXPECT_NE(sentence.find("Inconclusive: 2 of 6 epochs replayed; two replays of epoch 3"),
            std::string::npos)
      << sentence;
  EXPECT_NE(sentence.find("nothing is held against the provider"), std::string::npos) << sentence;
  const std::string summary = verdict_summary(v, "");
  EXPECT_NE(summary.find("epoch 3  INCONCLUSIVE"), std::string::npos) << summary;
  EXPECT_NE(summary.find("second replay (fresh process, scrambled memory)"), std::string::npos)
      << summary;
  Result<SigningKey> key = SigningKey::generate();
  ASSERT_TRUE(key.ok());
  const nlohmann::json j = verdict_to_json(v, key->public_key());
  EXPECT_EQ(j["checks"][0]["second_replay"]["agrees"], false);
  EXPECT_NE(j["checks"][0]["irreproducible"].get<std::string>().find("tensor w"),
            std::string::npos);
  EXPECT_TRUE(j["checks"][1]["second_replay"].is_null());

  v = sample_verdict(true);
  unreproduced(v);
  v.checks.back().passed = false;  // epoch 5 fails on its own
  v.checks.back().failures = {"epoch 5: replay is not bit-identical"};
  finalize_verdict(v);
  EXPECT_FALSE(v.accepted);
  EXPECT_FALSE(v.inconclusive);
  ASSERT_EQ(v.reasons.size(), 1u);
  EXPECT_EQ(v.reasons[0], "epoch 5: replay is not bit-identical");
}

TEST(Verdict, SignedFileVerifiesAndQuotesTheMeasurements) {
  vt::testing::ScratchDir dir;
  Result<SigningKey> key = SigningKey::generate();
  ASSERT_TRUE(key.ok());
  Verdict v = sample_verdict(true);
  finalize_verdict(v);
  ASSERT_TRUE(write_verdict_file(dir / "verdict.json", v, *key).ok());
  Result<CheckedVerdict> checked = verify_verdict_file(dir / "verdict.json", key->public_key());
  ASSERT_TRUE(checked.ok()) << checked.error().message;
  EXPECT_FALSE(checked->accepted);
  EXPECT_EQ(checked->task_id, v.task_id);
  const nlohmann::json& j = checked->verdict;
  EXPECT_EQ(j["format"], "veritrain.verdict.v1");
  EXPECT_EQ(j["result"], "rejected");
  EXPECT_EQ(j["challenge"]["challenged"], nlohmann::json({3, 5}));
  EXPECT_EQ(j["checks"][0]["fingerprint"]["mismatches"], 600);
  EXPECT_EQ(j["checks"][0]["fingerprint"]["allowed_mismatches"], 10);
  EXPECT_EQ(j["checks"][0]["fingerprint"]["thresholds"]["rel_l2"], 1e-3);
  EXPECT_EQ(j["verifier"]["fingerprint"], key->public_key().fingerprint());
  EXPECT_EQ(j["challenge"]["seed"], "c0ffee");
}

TEST(Verdict, AnyEditOrAnotherSignerIsRejected) {
  Result<SigningKey> key = SigningKey::generate();
  Result<SigningKey> other = SigningKey::generate();
  Verdict v = sample_verdict(false);
  finalize_verdict(v);
  Result<std::string> text = signed_verdict_text(v, *key);
  ASSERT_TRUE(text.ok());
  ASSERT_TRUE(verify_verdict_text(*text, std::nullopt).ok());
  // docs/verdict.md: BODY sits at byte 230 up to the final "}\n"; the signature at 14..142.
  const std::string body = text->substr(230, text->size() - 232);
  EXPECT_EQ(body.rfind("{\"bytes_fetched\":", 0), 0u) << body.substr(0, 40);
  EXPECT_TRUE(key->public_key().verify(as_bytes(body), *hex_decode(text->substr(14, 128))));

  std::string edited = *text;
  edited.replace(edited.find("\"accepted\""), 10, "\"rejected\"");
  Result<CheckedVerdict> r = verify_verdict_text(edited, std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kRejected);

  r = verify_verdict_text(*text, other->public_key());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kRejected);

  // The outer signer swapped for another key (and a signature by it) must not pass either:
  // the signed body names its own signer.
  Result<std::string> by_other = signed_verdict_text(v, *other);
  std::string spliced = by_other->substr(0, by_other->find("\"verdict\":")) +
                        text->substr(text->find("\"verdict\":"));
  EXPECT_FALSE(verify_verdict_text(spliced, std::nullopt).ok());

  r = verify_verdict_text("{\"verdict\":{}}", std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kInvalidInput);
}

TEST(Verdict, SummaryNamesChecksReasonsAndTheReport) {
  Verdict v = sample_verdict(true);
  finalize_verdict(v);
  const std::string s = verdict_summary(v, "/tmp/report");
  EXPECT_EQ(s.rfind("REJECTED", 0), 0u) << s;
  EXPECT_NE(s.find("challenged 2 of 6 epochs"), std::string::npos) << s;
  EXPECT_NE(s.find("epoch 3  FAILED"), std::string::npos) << s;
  EXPECT_NE(s.find("epoch 5  passed"), std::string::npos) << s;
  EXPECT_NE(s.find("600 of 1024 values differ (allowed 10)"), std::string::npos) << s;
  EXPECT_NE(s.find("/tmp/report/report.html"), std::string::npos) << s;
}

TEST(HtmlReport, IsSelfContainedAndEscapesEveryText) {
  Verdict v = sample_verdict(true);
  v.notes.push_back("<script>alert('x')</script> & more");
  finalize_verdict(v);
  const std::vector<SignedRecord> records =
      testing::records_with_tracking({{1, 2}, {1, 3}, {1, 4}, {1, 5}, {1, 6}, {1, 7}, {1, 8}});
  const std::string html = render_html_report(v, losses_from_log(records), "f1ngerprint");
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more"),
            std::string::npos);
  EXPECT_NE(html.find("workdir /tmp/&lt;w&gt;"), std::string::npos);
  // Nothing is fetched: the only URL is the SVG namespace, which is never loaded.
  std::string scrubbed = html;
  for (std::size_t at; (at = scrubbed.find("http://www.w3.org/2000/svg")) != std::string::npos;)
    scrubbed.erase(at, 26);
  EXPECT_EQ(scrubbed.find("://"), std::string::npos);
  EXPECT_EQ(scrubbed.find("src="), std::string::npos);
  EXPECT_EQ(scrubbed.find("url("), std::string::npos);
  EXPECT_NE(html.find("REJECTED"), std::string::npos);
  EXPECT_NE(html.find("<polyline"), std::string::npos);            // the loss curve
  EXPECT_NE(html.find("epoch 5: movement 2"), std::string::npos);  // movement bar tooltip
  EXPECT_NE(html.find("boosted (jump)"), std::string::npos);
  EXPECT_NE(html.find("MISMATCH"), std::string::npos);
  EXPECT_NE(html.find("f1ngerprint"), std::string::npos);
}

TEST(HtmlReport, WritesAtomicallyAndCopesWithNoData) {
  vt::testing::ScratchDir dir;
  Verdict v;
  v.task_id = "t";
  v.epochs = 3;
  finalize_verdict(v);
  const std::vector<double> loss(4, std::numeric_limits<double>::quiet_NaN());
  ASSERT_TRUE(write_html_report(dir / "report.html", v, loss).ok());
  Result<std::string> text = read_text_file(dir / "report.html");
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("No finite loss"), std::string::npos);
  EXPECT_NE(text->find("No tracking-fingerprint movement"), std::string::npos);
  EXPECT_NE(text->find("</html>"), std::string::npos);
  EXPECT_FALSE(write_html_report(dir / "missing" / "report.html", v, loss).ok());
}

}  // namespace
}  // namespace vt::verifier

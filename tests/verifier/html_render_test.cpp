// report.html renders in a real browser: headless Chromium (Debian's `chromium`) draws it to a
// PNG. Skipped where Chromium is not installed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_records.h"
#include "tests/test_util.h"
#include "verifier/html_report.h"

namespace vt::verifier {
namespace {

Verdict rendered_verdict() {
  Verdict v;
  v.task_id = std::string(64, 'd');
  v.log_head = std::string(64, 'e');
  v.epochs = 12;
  v.source = "workdir /tmp/provider";
  PolicyRequest r;
  r.confidence = 0.95;
  r.cheat_fraction = 0.25;
  Result<ChallengeRandom> rnd = ChallengeRandom::from_seed_hex("0123");
  const std::vector<double> movement = {0.4, 0.2, 0.15, 0.12, 0.1, 0.9, 0.08, 0.07, 0.0, 0.06, 0.05, 0.05};
  v.plan = plan_challenges(*derive_probability(r, 12), movement, *rnd);
  for (std::uint64_t e : v.plan.challenged) {
    EpochCheck c;
    c.epoch = e;
    c.passed = e != v.plan.challenged.front();
    fp::Comparison f;
    f.mode = fp::CompareMode::kTolerance;
    f.thresholds.rel_l2 = 1e-3;
    f.compared = 1024;
    f.allowed_mismatches = 10;
    f.mismatches = c.passed ? 2 : 300;
    f.rel_l2 = c.passed ? 2e-4 : 0.4;
    f.match = c.passed;
    c.fingerprint = f;
    if (!c.passed) c.failures.push_back("epoch " + std::to_string(e) + ": replay differs from the commitment");
    v.checks.push_back(c);
  }
  finalize_verdict(v);
  return v;
}

TEST(HtmlRender, ChromiumDrawsTheReportToPng) {
  if (!vt::testing::have_program("chromium")) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  vt::testing::ScratchDir dir;
  std::vector<double> loss;
  for (int e = 0; e <= 12; ++e) loss.push_back(2.3 / (1.0 + e));
  const std::filesystem::path html = dir / "report.html";
  ASSERT_TRUE(write_html_report(html, rendered_verdict(), loss, "ab12").ok());
  const std::filesystem::path png = dir / "report.png";
  const std::string cmd = "chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                          "--disable-background-networking --disable-component-update --disable-sync "
                          "--user-data-dir=" + (dir / "profile").string() + " --screenshot=" + png.string() +
                          " --window-size=1200,1600 file://" + html.string();
  const vt::testing::CommandResult run = vt::testing::run_command(cmd, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ASSERT_TRUE(std::filesystem::exists(png)) << run.err;
  std::ifstream in(png, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  // A blank 1200x1600 page compresses to a few KiB; charts, tables and text make far more.
  EXPECT_GT(std::filesystem::file_size(png), 40000u);
}

}  // namespace
}  // namespace vt::verifier

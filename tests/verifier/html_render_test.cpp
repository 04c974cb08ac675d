// report.html and the auditor's evidence page in a real browser: headless Chromium (Debian's
// `chromium`) loads each with no console message (no script error, nothing the page's
// Content-Security-Policy had to block), lays it out within a 1280 px window without
// horizontal scrolling, and draws it to a PNG. Skipped where Chromium is not installed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_records.h"
#include "tests/test_util.h"
#include "tests/verifier/chromium.h"
#include "verifier/audit/evidence_page.h"
#include "verifier/report/html_report.h"

namespace vt::verifier {
namespace {

// A rejected verdict with long, hostile and unbreakable strings: the layout must hold them.
Verdict rendered_verdict(std::uint64_t epochs) {
  Verdict v;
  v.task_id = std::string(64, 'd');
  v.log_head = std::string(64, 'e');
  v.provider_key = std::string(64, 'f');
  v.epochs = epochs;
  v.source = "workdir /tmp/provider/" + std::string(150, 'x');
  PolicyRequest r;
  r.confidence = 0.95;
  r.cheat_fraction = 0.25;
  Result<ChallengeRandom> rnd = ChallengeRandom::from_seed_hex("0123");
  std::vector<double> movement;
  for (std::uint64_t e = 1; e <= epochs; ++e)
    movement.push_back(e == 6 ? 0.9 : e == 9 ? 0.0 : 0.4 / e);
  v.plan = plan_challenges(*derive_probability(r, epochs), movement, *rnd);
  for (std::uint64_t e : v.plan.challenged) {
    EpochCheck c;
    c.epoch = e;
    c.passed = e != v.plan.challenged.front();
    fp::Comparison f;
    f.mode = e % 2 ? fp::CompareMode::kTolerance : fp::CompareMode::kExact;
    f.thresholds.rel_l2 = 1e-3;
    f.compared = 1024;
    f.allowed_mismatches = f.mode == fp::CompareMode::kExact ? 0 : 10;
    f.mismatches = c.passed ? (f.mode == fp::CompareMode::kExact ? 0 : 2) : 300;
    f.rel_l2 = c.passed ? 2e-4 : 0.4;
    f.match = c.passed;
    c.fingerprint = f;
    c.bytes_fetched = 3u << 20;
    c.claimed_loss = 2.3 / (1.0 + static_cast<double>(e));
    if (!c.passed)
      c.failures.push_back("epoch " + std::to_string(e) + ": replay differs <b>" +
                           std::string(200, 'y'));
    v.checks.push_back(c);
  }
  finalize_verdict(v);
  return v;
}

AuditFinding rendered_finding() {
  AuditFinding f;
  f.epoch = 7;
  f.steps = 40;
  f.trail_interval = 5;
  f.last_matching_step = 15;
  f.first_diverging_step = 20;
  f.committed_root.fill(0x11);
  f.replay_root.fill(0x22);
  f.differences.push_back({"layers.0.weight<script>", 12, 64, {1, 5, 9, 1000000}});
  f.differences.push_back({std::string(120, 'w'), 3, 64, {2}});
  f.summary = "epoch 7 first diverges between step 15 and step 20 of 40";
  return f;
}

void expect_renders(const std::filesystem::path& page, const vt::testing::ScratchDir& dir) {
  const vt::testing::BrowserView view = vt::testing::view_in_chromium(page, dir.path());
  EXPECT_EQ(view.console, "") << page;
  EXPECT_EQ(view.inner_width, 1280) << page;
  EXPECT_GT(view.scroll_width, 600) << page;
  EXPECT_LE(view.scroll_width, view.inner_width) << page << " scrolls horizontally";
  const std::filesystem::path png = dir / (page.stem().string() + ".png");
  ASSERT_TRUE(vt::testing::screenshot(page, png, dir.path(), 1600));
  std::ifstream in(png, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  // A blank 1280x1600 page compresses to a few KiB; charts, tables and text make far more.
  EXPECT_GT(std::filesystem::file_size(png), 40000u);
}

TEST(HtmlRender, ReportHasNoConsoleErrorsAndFits1280Pixels) {
  if (!vt::testing::have_program("chromium"))
    GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  for (std::uint64_t epochs : {12u, 300u}) {
    vt::testing::ScratchDir dir;
    std::vector<double> loss;
    for (std::uint64_t e = 0; e <= epochs; ++e)
      loss.push_back(2.3 / (1.0 + static_cast<double>(e)));
    const std::filesystem::path html = dir / "report.html";
    const std::string next = "veritrain audit --task /tmp/" + std::string(200, 't') +
                             "/task.json --workdir PROVIDER_WORKDIR "
                             "--epoch 3 --evidence evidence-epoch-3.json --report audit-epoch-3";
    ASSERT_TRUE(
        write_html_report(html, rendered_verdict(epochs), loss, std::string(64, 'a'), next).ok());
    expect_renders(html, dir);
  }
}

TEST(HtmlRender, EvidencePageHasNoConsoleErrorsAndFits1280Pixels) {
  if (!vt::testing::have_program("chromium"))
    GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  vt::testing::ScratchDir dir;
  EvidencePageInfo info{std::string(64, 'd'),
                        "/tmp/task.json",
                        "/tmp/" + std::string(180, 'w'),
                        std::string(64, 'f'),
                        true,
                        std::string(64, 'a'),
                        "evidence.json"};
  ASSERT_TRUE(write_evidence_page(dir / "audit", rendered_finding(), info).ok());
  expect_renders(dir / "audit" / "report.html", dir);
}

}  // namespace
}  // namespace vt::verifier

#include "verifier/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

#include "common/file_io.h"

namespace vt::verifier {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Plot geometry, in SVG user units; the page scales it with the window.
constexpr double kW = 1100, kH = 250, kLeft = 70, kRight = 20, kTop = 20, kBottom = 40;
constexpr double kPlotW = kW - kLeft - kRight, kPlotH = kH - kTop - kBottom;
constexpr std::size_t kMaxTableRows = 200;

constexpr std::string_view kStyle = R"(
body{font-family:sans-serif;margin:24px;color:#222;max-width:1150px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}
.accepted{color:#1a7f37}.rejected{color:#c62828}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f2f2f2}td.l,th.l{text-align:left}code{font-size:12px;word-break:break-all}
svg{width:100%;height:auto;background:#fff}.legend span{margin-right:18px;font-size:13px}
.sw{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
)";

std::string num(double v, const char* format = "%.4g") {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string u64(std::uint64_t v) { return std::to_string(v); }

// x of the centre of epoch e's band, for e = 1..n.
double x_of(std::uint64_t e, std::uint64_t n) {
  return kLeft + (static_cast<double>(e) - 0.5) / static_cast<double>(n) * kPlotW;
}

std::string svg_open(std::string_view label) {
  return "<svg viewBox=\"0 0 " + num(kW, "%.0f") + " " + num(kH, "%.0f") + "\" role=\"img\" aria-label=\"" +
         html_escape(label) + "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
}

// Shaded bands behind challenged epochs, the x axis with its labels, and the y axis.
std::string svg_frame(std::uint64_t n, const std::set<std::uint64_t>& challenged) {
  std::string s;
  const double band = kPlotW / static_cast<double>(n);
  for (std::uint64_t e : challenged) {
    s += "<rect x=\"" + num(x_of(e, n) - band / 2, "%.2f") + "\" y=\"" + num(kTop, "%.0f") + "\" width=\"" +
         num(band, "%.2f") + "\" height=\"" + num(kPlotH, "%.0f") + "\" fill=\"#dbe9ff\"/>\n";
  }
  const double y0 = kTop + kPlotH;
  s += "<line x1=\"" + num(kLeft, "%.0f") + "\" y1=\"" + num(y0, "%.0f") + "\" x2=\"" + num(kLeft + kPlotW, "%.0f") +
       "\" y2=\"" + num(y0, "%.0f") + "\" stroke=\"#444\"/>\n";
  s += "<line x1=\"" + num(kLeft, "%.0f") + "\" y1=\"" + num(kTop, "%.0f") + "\" x2=\"" + num(kLeft, "%.0f") +
       "\" y2=\"" + num(y0, "%.0f") + "\" stroke=\"#444\"/>\n";
  const std::uint64_t every = std::max<std::uint64_t>(1, (n + 19) / 20);
  for (std::uint64_t e = 1; e <= n; e += every) {
    s += "<text x=\"" + num(x_of(e, n), "%.2f") + "\" y=\"" + num(y0 + 16, "%.0f") +
         "\" font-size=\"11\" text-anchor=\"middle\">" + u64(e) + "</text>\n";
  }
  s += "<text x=\"" + num(kLeft + kPlotW / 2, "%.0f") + "\" y=\"" + num(kH - 4, "%.0f") +
       "\" font-size=\"12\" text-anchor=\"middle\">epoch</text>\n";
  return s;
}

std::string y_tick(double y, const std::string& label) {
  return "<line x1=\"" + num(kLeft - 4, "%.0f") + "\" y1=\"" + num(y, "%.2f") + "\" x2=\"" + num(kLeft + kPlotW, "%.0f") +
         "\" y2=\"" + num(y, "%.2f") + "\" stroke=\"#eee\"/><text x=\"" + num(kLeft - 6, "%.0f") + "\" y=\"" +
         num(y + 4, "%.2f") + "\" font-size=\"11\" text-anchor=\"end\">" + html_escape(label) + "</text>\n";
}

// Every point is the provider's claim except those a replay reproduced bit for bit (`verified`):
// those are drawn filled green, claims hollow.
std::string loss_chart(std::span<const double> loss, std::uint64_t n, const std::set<std::uint64_t>& challenged,
                       const std::set<std::uint64_t>& verified) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (std::uint64_t e = 1; e <= n && e < loss.size(); ++e) {
    if (std::isfinite(loss[e])) lo = std::min(lo, loss[e]), hi = std::max(hi, loss[e]);
  }
  if (!(lo <= hi)) return "<p>No finite loss was committed for epochs 1.." + u64(n) + ".</p>\n";
  const double pad = hi > lo ? 0.05 * (hi - lo) : std::max(std::abs(hi) * 0.05, 1e-6);
  lo -= pad, hi += pad;
  const auto y_of = [&](double v) { return kTop + (hi - v) / (hi - lo) * kPlotH; };
  std::string s = svg_open("mean training loss per epoch") + svg_frame(n, challenged);
  for (int i = 0; i <= 4; ++i) s += y_tick(y_of(lo + (hi - lo) * i / 4), num(lo + (hi - lo) * i / 4));
  std::string points;
  std::string dots;
  for (std::uint64_t e = 1; e <= n && e < loss.size(); ++e) {
    if (!std::isfinite(loss[e])) continue;
    const std::string xy = num(x_of(e, n), "%.2f") + "," + num(y_of(loss[e]), "%.2f");
    points += xy + " ";
    const bool ok = verified.count(e) > 0;
    const std::string colour = ok ? "#2e7d32" : challenged.count(e) ? "#1f4fbf" : "#555";
    dots += "<circle cx=\"" + num(x_of(e, n), "%.2f") + "\" cy=\"" + num(y_of(loss[e]), "%.2f") + "\" r=\"3\" fill=\"" +
            (ok ? colour : std::string("#fff")) + "\" stroke=\"" + colour + "\"><title>epoch " + u64(e) + ": loss " +
            num(loss[e]) + (ok ? " (verified: replayed bit for bit)" : " (claimed by the provider)") + "</title></circle>\n";
  }
  s += "<polyline points=\"" + points + "\" fill=\"none\" stroke=\"#555\" stroke-width=\"1.5\"/>\n" + dots;
  return s + "</svg>\n";
}

const char* boost_colour(Boost b) {
  switch (b) {
    case Boost::kJump: return "#d9534f";
    case Boost::kStall: return "#f0ad4e";
    case Boost::kNone: break;
  }
  return "#8a9bb5";
}

// Bars on a log10 scale: movement spans orders of magnitude over a learning-rate schedule.
std::string movement_chart(const ChallengePlan& plan, const std::set<std::uint64_t>& challenged) {
  const std::uint64_t n = plan.epochs.size();
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const EpochChance& c : plan.epochs) {
    if (std::isfinite(c.movement) && c.movement > 0) lo = std::min(lo, c.movement), hi = std::max(hi, c.movement);
  }
  if (n == 0 || !(lo <= hi)) return "<p>No tracking-fingerprint movement is known for this run.</p>\n";
  double top = std::ceil(std::log10(hi) + 1e-9), bottom = std::floor(std::log10(lo)) - 1;
  if (top - bottom < 2) bottom = top - 2;
  const auto y_of = [&](double v) { return kTop + (top - std::log10(v)) / (top - bottom) * kPlotH; };
  std::string s = svg_open("tracking-fingerprint movement per epoch, log scale") + svg_frame(n, challenged);
  const int steps = static_cast<int>(top - bottom);
  const int stride = std::max(1, steps / 6);
  for (int k = 0; k <= steps; k += stride) s += y_tick(y_of(std::pow(10.0, bottom + k)), "1e" + num(bottom + k, "%.0f"));
  const double band = kPlotW / static_cast<double>(n);
  const double y0 = kTop + kPlotH;
  for (const EpochChance& c : plan.epochs) {
    if (std::isnan(c.movement)) continue;
    double y = y0 - 3;  // zero movement: a sliver at the floor, coloured as a stall
    if (std::isinf(c.movement)) y = kTop;
    else if (c.movement > 0) y = y_of(c.movement);
    s += "<rect x=\"" + num(x_of(c.epoch, n) - band * 0.35, "%.2f") + "\" y=\"" + num(y, "%.2f") + "\" width=\"" +
         num(band * 0.7, "%.2f") + "\" height=\"" + num(y0 - y, "%.2f") + "\" fill=\"" + boost_colour(c.boost) +
         "\"><title>epoch " + u64(c.epoch) + ": movement " + num(c.movement) + ", p = " + num(c.probability) +
         (c.boost != Boost::kNone ? ", boosted (" + std::string(boost_name(c.boost)) + ")" : "") + "</title></rect>\n";
    if (challenged.count(c.epoch)) {
      const double x = x_of(c.epoch, n);
      s += "<path d=\"M" + num(x, "%.2f") + " " + num(y0 + 20, "%.0f") + " l-5 8 h10 z\" fill=\"#1f4fbf\"/>\n";
    }
  }
  return s + "</svg>\n";
}

// A bar of measured/limit; the tick marks the limit. Exact mode has limit 0: then all or nothing.
std::string gauge(double measured, double limit) {
  const bool ok = measured <= limit;
  const double scale = std::max(2.0 * limit, measured);
  double frac = scale > 0 && std::isfinite(measured) ? measured / scale : (ok ? 0.0 : 1.0);
  if (std::isnan(measured)) frac = 1.0;
  const double limit_x = scale > 0 ? 160.0 * limit / scale : 0.0;
  return "<svg viewBox=\"0 0 164 14\" width=\"164\" height=\"14\" xmlns=\"http://www.w3.org/2000/svg\">"
         "<rect x=\"0\" y=\"2\" width=\"160\" height=\"10\" fill=\"#eee\"/><rect x=\"0\" y=\"2\" width=\"" +
         num(std::max(160.0 * frac, ok ? 0.0 : 3.0), "%.2f") + "\" height=\"10\" fill=\"" + (ok ? "#2e9d4f" : "#c62828") +
         "\"/><line x1=\"" + num(limit_x, "%.2f") + "\" y1=\"0\" x2=\"" + num(limit_x, "%.2f") +
         "\" y2=\"14\" stroke=\"#222\" stroke-width=\"2\"/></svg>";
}

std::string comparison_row(std::uint64_t epoch, std::string_view what, const fp::Comparison& c) {
  return "<tr><td>" + u64(epoch) + "</td><td class=\"l\">" + html_escape(what) + " (" +
         html_escape(fp::compare_mode_name(c.mode)) + ")</td><td class=\"l " + (c.match ? "accepted\">match" : "rejected\">MISMATCH") +
         "</td><td>" + u64(c.compared) + "</td><td>" + u64(c.mismatches) + " / " + u64(c.allowed_mismatches) +
         "</td><td>" + gauge(static_cast<double>(c.mismatches), static_cast<double>(c.allowed_mismatches)) + "</td><td>" +
         num(c.max_abs_diff) + "</td><td>" + num(c.max_rel_diff) + "</td><td>" + num(c.rel_l2) + " / " +
         num(c.mode == fp::CompareMode::kExact ? 0.0 : c.thresholds.rel_l2) + "</td><td>" +
         gauge(c.rel_l2, c.mode == fp::CompareMode::kExact ? 0.0 : c.thresholds.rel_l2) + "</td></tr>\n";
}

std::string checks_section(const Verdict& v) {
  if (v.checks.empty()) return "<p>No epoch was checked.</p>\n";
  std::string s =
      "<table><tr><th>epoch</th><th class=\"l\">replay compared with</th><th class=\"l\">result</th><th>values</th>"
      "<th>mismatches / allowed</th><th></th><th>max abs diff</th><th>max rel diff</th><th>rel L2 / limit</th>"
      "<th></th></tr>\n";
  for (const EpochCheck& c : v.checks) {
    if (c.fingerprint) s += comparison_row(c.epoch, "committed fingerprint", *c.fingerprint);
    if (c.full_state) s += comparison_row(c.epoch, "fetched snapshot", *c.full_state);
  }
  s += "</table>\n<table style=\"margin-top:12px\"><tr><th>epoch</th><th class=\"l\">result</th>"
       "<th class=\"l\">replay root</th><th>replay s</th><th>bytes fetched</th><th class=\"l\">failures and notes</th></tr>\n";
  for (const EpochCheck& c : v.checks) {
    std::string detail;
    for (const std::string& f : c.failures) detail += "<div class=\"rejected\">" + html_escape(f) + "</div>";
    for (const std::string& n : c.replay_notes) detail += "<div>note: " + html_escape(n) + "</div>";
    s += "<tr><td>" + u64(c.epoch) + "</td><td class=\"l " + (c.passed ? "accepted\">passed" : "rejected\">FAILED") +
         "</td><td class=\"l\">" + (c.replay_root_matches ? "equals the committed root" : "differs (or not compared)") +
         "</td><td>" + num(c.replay_seconds, "%.2f") + "</td><td>" + u64(c.bytes_fetched) + "</td><td class=\"l\">" +
         detail + "</td></tr>\n";
  }
  return s + "</table>\n";
}

std::string challenge_table(const ChallengePlan& plan) {
  const bool all = plan.epochs.size() <= kMaxTableRows;
  std::string s = all ? "" : "<p>Only boosted or challenged epochs are listed.</p>\n";
  s += "<table><tr><th>epoch</th><th>movement</th><th>recent median</th><th class=\"l\">boost</th>"
       "<th>probability</th><th class=\"l\">challenged</th></tr>\n";
  for (const EpochChance& c : plan.epochs) {
    if (!all && !c.challenged && c.boost == Boost::kNone) continue;
    s += "<tr><td>" + u64(c.epoch) + "</td><td>" + num(c.movement) + "</td><td>" + num(c.reference) +
         "</td><td class=\"l\">" + html_escape(boost_name(c.boost)) + "</td><td>" + num(c.probability) +
         "</td><td class=\"l\">" + (c.challenged ? "yes" : "") + "</td></tr>\n";
  }
  return s + "</table>\n";
}

std::string list(const std::vector<std::string>& items, const char* cls) {
  std::string s = "<ul>";
  for (const std::string& i : items) s += "<li class=\"" + std::string(cls) + "\">" + html_escape(i) + "</li>";
  return s + "</ul>\n";
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::vector<double> losses_from_log(std::span<const SignedRecord> records) {
  std::vector<double> loss(records.size(), kNaN);
  for (std::size_t i = 0; i < records.size(); ++i) loss[i] = records[i].record.metrics.loss;
  return loss;
}

std::string render_html_report(const Verdict& v, std::span<const double> loss, std::string_view verifier_fingerprint) {
  const std::set<std::uint64_t> challenged(v.plan.challenged.begin(), v.plan.challenged.end());
  const std::uint64_t n = std::max<std::uint64_t>(v.epochs, v.plan.epochs.size());
  const ProbabilityDerivation& d = v.plan.derivation;
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                  "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
                  "<title>veritrain verdict " + html_escape(v.task_id.substr(0, 16)) + "</title><style>" +
                  std::string(kStyle) + "</style></head><body>\n";
  s += "<h1>veritrain verdict: <span class=\"" + std::string(v.accepted ? "accepted\">ACCEPTED" : "rejected\">REJECTED") +
       "</span></h1>\n<table>";
  const auto row = [&](std::string_view k, const std::string& value) {
    s += "<tr><th class=\"l\">" + html_escape(k) + "</th><td class=\"l\"><code>" + html_escape(value) + "</code></td></tr>";
  };
  row("task_id", v.task_id);
  row("provider key", (v.provider_key.empty() ? std::string("(unread)") : v.provider_key) +
                          (v.provider_key_pinned ? " (pinned)" : " (NOT pinned: no --provider-key)"));
  row("log head", v.log_head);
  row("source", v.source + (v.online ? " (online)" : ""));
  row("epochs", u64(v.epochs));
  row("check probability", d.formula);
  row("challenged", u64(v.plan.challenged.size()) + " epoch(s)" +
                        (v.plan.fallback_used ? "; no epoch was drawn, so one was picked uniformly" : ""));
  row("seed", v.plan.seed_hex.empty() ? "secret (OS CSPRNG)" : v.plan.seed_hex);
  row("bytes fetched", u64(v.bytes_fetched));
  row("started / finished", v.started + " / " + v.finished);
  if (!verifier_fingerprint.empty()) row("verifier key", std::string(verifier_fingerprint));
  s += "</table>\n";
  if (!v.reasons.empty()) s += "<h2>Why it was rejected</h2>\n" + list(v.reasons, "rejected");
  if (!v.notes.empty()) s += "<h2>Notes</h2>\n" + list(v.notes, "");
  s += "<h2>Checks: replay distance against thresholds</h2>\n" + checks_section(v);
  std::set<std::uint64_t> verified;
  for (const EpochCheck& c : v.checks) {
    if (c.loss_verified) verified.insert(c.epoch);
  }
  s += "<h2>Training loss (claimed by the provider unless marked verified)</h2>\n" +
       (n ? loss_chart(loss, n, challenged, verified) : std::string("<p>No epochs.</p>\n"));
  s += "<p class=\"legend\"><span><i class=\"sw\" style=\"background:#dbe9ff\"></i>challenged epoch</span>"
       "<span><i class=\"sw\" style=\"background:#2e7d32\"></i>verified: the replay reproduced this loss bit for bit</span>"
       "<span><i class=\"sw\" style=\"background:#fff;border:1px solid #555\"></i>claimed: not replayed (or tolerance "
       "mode)</span></p>\n";
  s += "<h2>Tracking-fingerprint movement (relative L2 between consecutive epochs)</h2>\n" +
       movement_chart(v.plan, challenged);
  s += "<p class=\"legend\"><span><i class=\"sw\" style=\"background:#8a9bb5\"></i>ordinary</span>"
       "<span><i class=\"sw\" style=\"background:#d9534f\"></i>jump (boosted)</span>"
       "<span><i class=\"sw\" style=\"background:#f0ad4e\"></i>stall (boosted)</span>"
       "<span><i class=\"sw\" style=\"background:#1f4fbf\"></i>challenged (&#9650; below the axis)</span></p>\n";
  s += "<h2>Challenge probabilities</h2>\n" + challenge_table(v.plan);
  s += "</body></html>\n";
  return s;
}

Status write_html_report(const std::filesystem::path& path, const Verdict& verdict, std::span<const double> loss,
                         std::string_view verifier_fingerprint) {
  return write_file_atomic(path, render_html_report(verdict, loss, verifier_fingerprint));
}

}  // namespace vt::verifier

#include "verifier/report/html_report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "common/file_io.h"
#include "common/text.h"

namespace vt::verifier {
namespace {

using html::Frame;
using html::num;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::size_t kMaxTableRows = 200;

std::string u64(std::uint64_t v) { return std::to_string(v); }

// Every point is the provider's claim except those a replay reproduced bit for bit (`verified`):
// those are drawn filled green, claims hollow. The y axis starts at zero when every loss is
// non-negative and near zero; it never goes below zero unless a loss does.
std::string loss_chart(std::span<const double> loss, std::uint64_t n,
                       const std::vector<std::uint64_t>& challenged,
                       const std::set<std::uint64_t>& verified) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (std::uint64_t e = 1; e <= n && e < loss.size(); ++e) {
    if (std::isfinite(loss[e])) lo = std::min(lo, loss[e]), hi = std::max(hi, loss[e]);
  }
  if (!(lo <= hi)) return "<p>No finite loss was committed for epochs 1.." + u64(n) + ".</p>\n";
  const double pad = hi > lo ? 0.08 * (hi - lo) : std::max(std::abs(hi) * 0.1, 1e-6);
  const bool non_negative = lo >= 0.0;
  lo -= pad, hi += pad;
  if (non_negative && (lo < 0.0 || lo < 0.25 * hi)) lo = 0.0;
  const auto y_of = [&](double v) { return Frame::kTop + (hi - v) / (hi - lo) * Frame::kPlotH; };
  Frame f;
  f.n = n;
  std::string s =
      html::svg_open(f, "mean training loss per epoch", "epoch", "mean training loss", challenged);
  for (double t : html::nice_ticks(lo, hi)) s += html::y_tick(y_of(t), num(t));
  std::string points, dots;
  for (std::uint64_t e = 1; e <= n && e < loss.size(); ++e) {
    if (!std::isfinite(loss[e])) continue;
    const std::string x = num(f.x_of(e), "%.2f"), y = num(y_of(loss[e]), "%.2f");
    points += x + "," + y + " ";
    const bool ok = verified.count(e) > 0;
    const bool was_challenged =
        std::find(challenged.begin(), challenged.end(), e) != challenged.end();
    const std::string colour = ok ? "#2e7d32" : was_challenged ? "#1f4fbf" : "#555";
    dots += "<circle cx=\"" + x + "\" cy=\"" + y + "\" r=\"" + (ok ? "4" : "3") + "\" fill=\"" +
            (ok ? colour : std::string("#fff")) + "\" stroke=\"" + colour + "\"><title>epoch " +
            u64(e) + ": loss " + num(loss[e]) +
            (ok ? " (verified: replayed bit for bit)" : " (claimed by the provider)") +
            "</title></circle>\n";
  }
  s += "<polyline points=\"" + points +
       "\" fill=\"none\" stroke=\"#555\" stroke-width=\"1.5\"/>\n" + dots;
  return s + "</svg>\n";
}

const char* boost_colour(Boost b) {
  switch (b) {
    case Boost::kJump:
      return "#d9534f";
    case Boost::kStall:
      return "#f0ad4e";
    case Boost::kNone:
      break;
  }
  return "#8a9bb5";
}

// Bars on a log10 scale: movement spans orders of magnitude over a learning-rate schedule.
std::string movement_chart(const ChallengePlan& plan) {
  const std::uint64_t n = plan.epochs.size();
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const EpochChance& c : plan.epochs) {
    if (std::isfinite(c.movement) && c.movement > 0)
      lo = std::min(lo, c.movement), hi = std::max(hi, c.movement);
  }
  if (n == 0 || !(lo <= hi))
    return "<p>No tracking-fingerprint movement is known for this run.</p>\n";
  const double top = std::ceil(std::log10(hi) + 1e-9);
  double bottom = std::floor(std::log10(lo)) - 1;
  if (top - bottom < 2) bottom = top - 2;
  const auto y_of = [&](double v) {
    return Frame::kTop + (top - std::log10(v)) / (top - bottom) * Frame::kPlotH;
  };
  Frame f;
  f.n = n;
  std::string s = html::svg_open(f, "tracking-fingerprint movement per epoch, log scale", "epoch",
                                 "movement (relative L2, log scale)", plan.challenged);
  const int steps = static_cast<int>(top - bottom);
  const int stride = std::max(1, steps / 6);
  for (int k = 0; k <= steps; k += stride)
    s += html::y_tick(y_of(std::pow(10.0, bottom + k)), "1e" + num(bottom + k, "%.0f"));
  const double y0 = Frame::kTop + Frame::kPlotH;
  for (const EpochChance& c : plan.epochs) {
    if (std::isnan(c.movement)) continue;
    double y = y0 - 3;  // zero movement: a sliver at the floor, coloured as a stall
    if (std::isinf(c.movement))
      y = Frame::kTop;
    else if (c.movement > 0)
      y = y_of(c.movement);
    s += "<rect x=\"" + num(f.x_of(c.epoch) - f.band() * 0.35, "%.2f") + "\" y=\"" +
         num(y, "%.2f") + "\" width=\"" + num(f.band() * 0.7, "%.2f") + "\" height=\"" +
         num(y0 - y, "%.2f") + "\" fill=\"" + boost_colour(c.boost) + "\"><title>epoch " +
         u64(c.epoch) + ": movement " + num(c.movement) + ", p = " + num(c.probability) +
         (c.boost != Boost::kNone ? ", boosted (" + std::string(boost_name(c.boost)) + ")" : "") +
         "</title></rect>\n";
    if (c.challenged) {
      s += "<path d=\"M" + num(f.x_of(c.epoch), "%.2f") + " " + num(y0 + 20, "%.0f") +
           " l-5 8 h10 z\" fill=\"#1f4fbf\"/>\n";
    }
  }
  return s + "</svg>\n";
}

// One comparison as table cells. Exact mode has nothing to measure against a threshold: the
// values are bit-identical or they are not, so it says that in words instead of 0 / 0 bars.
std::vector<std::string> comparison_cells(std::uint64_t epoch, std::string_view what,
                                          const fp::Comparison& c, std::string_view arithmetic) {
  // A bit-for-bit comparison is named by the task's arithmetic: "exact" would misname a
  // portable task.
  const std::string mode = c.mode == fp::CompareMode::kExact
                               ? "bit for bit (" + std::string(arithmetic) + ")"
                               : std::string(fp::compare_mode_name(c.mode));
  std::vector<std::string> row = {u64(epoch), html_escape(what), html_escape(mode),
                                  c.match ? "<span class=\"accepted\">equal</span>"
                                          : "<span class=\"rejected\">MISMATCH</span>",
                                  u64(c.compared)};
  if (c.mode == fp::CompareMode::kExact) {
    row.push_back(c.mismatches == 0 ? "bit-identical"
                                    : u64(c.mismatches) + " differ (none allowed)");
    row.push_back(
        c.mismatches == 0 ? "" : "max abs " + num(c.max_abs_diff) + ", rel L2 " + num(c.rel_l2));
    row.push_back("<span class=\"muted\">none: every bit must match</span>");
    return row;
  }
  row.push_back(
      u64(c.mismatches) + " of " + u64(c.allowed_mismatches) + " allowed " +
      html::gauge(static_cast<double>(c.mismatches), static_cast<double>(c.allowed_mismatches)));
  row.push_back("max abs " + num(c.max_abs_diff) + ", max rel " + num(c.max_rel_diff));
  row.push_back(num(c.rel_l2) + " of " + num(c.thresholds.rel_l2) + " " +
                html::gauge(c.rel_l2, c.thresholds.rel_l2));
  return row;
}

std::string checks_section(const Verdict& v) {
  if (v.checks.empty()) return "<p>No epoch was replayed.</p>\n";
  // Every challenged epoch has a row here, compared or not; whether the epoch passed is said
  // once, in the next table (a comparison can be equal while the epoch fails on its evidence).
  html::Table compared{
      "What each replay was compared with (each epoch's verdict: next table)",
      {"epoch", "<compared with", "<mode", "<result", "values compared", "<differing values",
       "<largest difference", "<relative L2 distance / limit"},
      {}};
  auto it = v.committed_environment.find("arithmetic");
  const std::string arithmetic =
      it == v.committed_environment.end() ? std::string("exact") : it->second;
  for (const EpochCheck& c : v.checks) {
    if (c.fingerprint)
      compared.rows.push_back(
          comparison_cells(c.epoch, "committed fingerprint", *c.fingerprint, arithmetic));
    if (c.full_state)
      compared.rows.push_back(
          comparison_cells(c.epoch, "fetched snapshot", *c.full_state, arithmetic));
    if (!c.fingerprint && !c.full_state) {
      compared.rows.push_back({u64(c.epoch), "nothing: the epoch was not replayed", "",
                               "<span class=\"rejected\">not compared</span>", "", "", "",
                               "see its failures in the next table"});
    }
  }
  html::Table replays{"Each challenged epoch",
                      {"epoch", "<result", "<replay's Merkle root", "replay time", "fetched",
                       "<failures and notes"},
                      {}};
  for (const EpochCheck& c : v.checks) {
    std::string detail;
    for (const std::string& f : c.failures)
      detail += "<div class=\"rejected\">" + html_escape(f) + "</div>";
    for (const std::string& n : c.replay_notes) detail += "<div>note: " + html_escape(n) + "</div>";
    if (c.inconclusive())
      detail += "<div class=\"inconclusive\">" + html_escape(c.irreproducible) + "</div>";
    replays.rows.push_back(
        {u64(c.epoch),
         c.passed           ? "<span class=\"accepted\">passed</span>"
         : c.inconclusive() ? "<span class=\"inconclusive\">INCONCLUSIVE</span>"
                            : "<span class=\"rejected\">FAILED</span>",
         !c.replayed             ? "not replayed"
         : c.replay_root_matches ? "equals the committed root"
                                 : "differs (or not compared)",
         c.replayed ? num(c.replay_seconds, "%.2f") + " s" : std::string("not replayed"),
         size_text(static_cast<double>(c.bytes_fetched)) +
             (c.passed && !c.after_fetched ? " (start state only)" : ""),
         detail});
  }
  return html::table(compared) + html::table(replays);
}

// Every epoch's committed held-out metrics (tasks with an eval split), and for the challenged
// ones what the replay made of them.
std::string held_out_table(const Verdict& v) {
  html::Table t{"Held-out loss and accuracy, as committed every epoch",
                {"epoch", "held-out loss", "accuracy", "examples", "<status"},
                {}};
  for (std::size_t e = 0; e < v.claimed_eval.size(); ++e) {
    const std::optional<EvalClaim>& claim = v.claimed_eval[e];
    if (!claim) continue;
    std::string status = "claimed: not challenged";
    for (const EpochCheck& c : v.checks) {
      if (c.epoch != e) continue;
      status = c.eval_status == "verified" ? "<span class=\"accepted\">verified</span>: the "
                                             "replay reproduced its bits"
               : c.eval_status == "within_tolerance"
                   ? "<span class=\"accepted\">within tolerance</span> of the replay's"
               : c.passed ? "claimed: not compared"
                          : "<span class=\"rejected\">not confirmed</span>: the epoch failed";
    }
    t.rows.push_back({u64(e), num(claim->loss, "%.6g"),
                      claim->accuracy ? num(*claim->accuracy * 100.0, "%.2f") + " %" : "n/a",
                      u64(claim->examples), status});
  }
  return t.rows.empty() ? "" : html::table(t);
}

std::string metrics_section(const Verdict& v) {
  if (v.checks.empty()) return "";
  html::Table t{"Mean training loss of the replayed epochs",
                {"epoch", "claimed by the provider", "replayed", "<status"},
                {}};
  for (const EpochCheck& c : v.checks) {
    t.rows.push_back(
        {u64(c.epoch), num(c.claimed_loss, "%.6g"),
         c.replay_loss ? num(*c.replay_loss, "%.6g") : "n/a",
         c.loss_verified
             ? "<span class=\"accepted\">verified</span>: the replay reproduced its bits"
             : "claimed: not compared (tolerance mode, or no replay)"});
  }
  return "<h2>Verified and claimed metrics</h2>\n<p>A metric is <b>verified</b> only where a "
         "replay reproduced it bit "
         "for bit; every other number in this report that comes from the provider is a "
         "<b>claim</b>.</p>\n" +
         html::table(t) + held_out_table(v);
}

std::string challenge_table(const ChallengePlan& plan) {
  const bool all = plan.epochs.size() <= kMaxTableRows;
  html::Table t{all ? "Every epoch's challenge probability"
                    : "Boosted or challenged epochs (others: p as above)",
                {"epoch", "movement", "recent median", "<boost", "probability", "<challenged"},
                {}};
  for (const EpochChance& c : plan.epochs) {
    if (!all && !c.challenged && c.boost == Boost::kNone) continue;
    t.rows.push_back({u64(c.epoch), num(c.movement), num(c.reference),
                      html_escape(boost_name(c.boost)), num(c.probability),
                      c.challenged ? "yes" : ""});
  }
  return html::table(t);
}

std::string list(const std::vector<std::string>& items, const char* cls) {
  std::string s = "<ul>";
  for (const std::string& i : items)
    s += "<li class=\"" + std::string(cls) + "\">" + html_escape(i) + "</li>";
  return s + "</ul>\n";
}

std::string legend(std::initializer_list<std::pair<const char*, const char*>> items) {
  std::string s = "<p class=\"legend\">";
  for (const auto& [style, text] : items) {
    s += "<span><i class=\"sw\" style=\"" + std::string(style) + "\"></i>" + text + "</span>";
  }
  return s + "</p>\n";
}

// The committed environment beside this verifier's, field by field: what an exact replay
// depends on, and why this verifier did not judge.
std::string environment_section(const Verdict& v) {
  std::string s =
      "<h2>Arithmetic environment</h2>\n<p>An exact-mode replay gives the provider's bits only in "
      "the arithmetic environment it trained in. This verifier cannot reproduce the fields "
      "marked below, so it replayed nothing; what would judge the run: " +
      html_escape(v.environment_judge) +
      ".</p>\n<div class=\"scroll\"><table>\n<tr><th>field</th><th>committed by the "
      "provider</th><th>this "
      "verifier</th></tr>\n";
  for (const EnvironmentDifference& d : v.environment_unmatched) {
    s += "<tr><td class=\"rejected\">" + html_escape(d.field) + "</td><td>" +
         html_escape(d.committed) + "</td><td>" + html_escape(d.here) + "</td></tr>\n";
  }
  for (const auto& [field, value] : v.committed_environment) {
    bool unmatched = false;
    for (const EnvironmentDifference& d : v.environment_unmatched) unmatched |= d.field == field;
    if (unmatched) continue;
    auto here = v.verifier_environment.find(field);
    s += "<tr><td>" + html_escape(field) + "</td><td>" + html_escape(value) + "</td><td>" +
         html_escape(here == v.verifier_environment.end() ? std::string() : here->second) +
         "</td></tr>\n";
  }
  return s + "</table></div>\n";
}

}  // namespace

std::string render_html_report(const Verdict& v, std::span<const double> loss,
                               std::string_view verifier_fingerprint, std::string_view next_step) {
  const std::uint64_t n = std::max<std::uint64_t>(v.epochs, v.plan.epochs.size());
  const ProbabilityDerivation& d = v.plan.derivation;
  std::string s = html::page_open("veritrain verdict " + v.task_id.substr(0, 16));
  s += "<h1>veritrain verdict: <span class=\"" +
       std::string(v.accepted       ? "accepted\">ACCEPTED"
                   : v.inconclusive ? "inconclusive\">INCONCLUSIVE"
                                    : "rejected\">REJECTED") +
       "</span></h1>\n<p class=\"lead\">" + html_escape(verdict_sentence(v)) + "</p>\n";
  if (!v.environment_unmatched.empty()) s += environment_section(v);
  if (!v.accepted && !v.inconclusive) {
    s += "<h2>What to do next</h2>\n";
    // The first failed epoch decides what its audit is for: a replay that diverged, or evidence
    // that could not be used (never replayed, or replayed to the committed root).
    const EpochCheck* first = nullptr;
    for (const EpochCheck& c : v.checks) {
      if (!c.passed && !c.inconclusive() && first == nullptr) first = &c;
    }
    const bool evidence = first != nullptr && (!first->fingerprint || first->replay_root_matches);
    if (first != nullptr && !next_step.empty() && evidence) {
      s += "<p>The provider's evidence for epoch " + u64(first->epoch) +
           " could not be used (a stored state that is corrupt, missing or not the committed "
           "one), so the epoch failed on its evidence, not on its work. The auditor replays it "
           "where it can, checks each stored state it needs, and writes signed evidence of what "
           "it found that a third party can re-check:</p>\n<pre>" +
           html_escape(next_step) + "</pre>\n";
    } else if (first != nullptr && !next_step.empty()) {
      s += "<p>Replay the disputed epoch from the provider's stored artifacts; the auditor locates "
           "the first step "
           "where it diverges and writes signed evidence a third party can re-check:</p>\n<pre>" +
           html_escape(next_step) + "</pre>\n";
    } else {
      s += "<p>No epoch's replay failed: the reasons below are about the log itself (its "
           "signatures, chain or completeness). <code>veritrain log verify</code> on a copy of "
           "the provider's workdir names the same problems:</p>\n<pre>" +
           html_escape(next_step.empty() ? "veritrain log verify --workdir PROVIDER_WORKDIR"
                                         : next_step) +
           "</pre>\n";
    }
    s += "<h2>Why it was rejected</h2>\n" + list(v.reasons, "rejected");
  }
  s += "<h2>How the checks were chosen</h2>\n<p>" + html_escape(d.guarantee) + ".</p>\n";
  std::string challenged;
  for (std::uint64_t e : v.plan.challenged) challenged += (challenged.empty() ? "" : ", ") + u64(e);
  s += html::facts(
      "Challenge policy",
      {{"policy", d.method},
       {"check probability p", d.formula},
       {"expected checks", num(d.expected_checks, "%.2f") + " of " + u64(v.epochs) + " epochs"},
       {"challenged epochs",
        (challenged.empty() ? "none" : challenged) +
            (v.plan.fallback_used ? " (no epoch was drawn, so one was picked uniformly)" : "")},
       {"seed", v.plan.seed_hex.empty() ? "secret (OS CSPRNG)" : v.plan.seed_hex}});
  s += "<h2>Parties and evidence</h2>\n";
  s += html::facts(
      "Who and what",
      {{"provider key (SHA-256)", provider_key_text(v)},
       {"verifier key (SHA-256)", verifier_fingerprint.empty() ? std::string("(not given)")
                                                               : std::string(verifier_fingerprint)},
       {"task_id", v.task_id},
       {"log head", v.log_head.empty() ? std::string("(no record could be read)") : v.log_head},
       {"source", v.source + (v.online ? " (followed online, while training ran)" : "")},
       {"arithmetic", arithmetic_of(v.committed_environment)},
       {"epochs", u64(v.epochs)},
       {"fetched in total", size_text(static_cast<double>(v.bytes_fetched))},
       {"started", v.started},
       {"finished", v.finished}});
  if (!v.notes.empty()) s += "<h2>Notes</h2>\n" + list(v.notes, "");
  s += "<h2>Checks</h2>\n" + checks_section(v);
  s += metrics_section(v);
  std::set<std::uint64_t> verified;
  for (const EpochCheck& c : v.checks) {
    if (c.loss_verified) verified.insert(c.epoch);
  }
  s += "<h2>Training loss</h2>\n" +
       (n ? loss_chart(loss, n, v.plan.challenged, verified) : std::string("<p>No epochs.</p>\n"));
  s += legend({{"background:#dbe9ff", "challenged epoch"},
               {"background:#2e7d32;border-radius:6px",
                "verified: the replay reproduced this loss bit for bit"},
               {"background:#fff;border:1px solid #555;border-radius:6px",
                "claimed by the provider, not verified"}});
  s += "<h2>Tracking-fingerprint movement</h2>\n<p>How far the sampled weights moved in each "
       "epoch, relative to "
       "where they started it. An epoch that moved far more (jump) or far less (stall) than its "
       "recent neighbours "
       "is challenged with a higher probability.</p>\n" +
       movement_chart(v.plan);
  s += legend({{"background:#8a9bb5", "ordinary"},
               {"background:#d9534f", "jump (boosted)"},
               {"background:#f0ad4e", "stall (boosted)"},
               {"background:#1f4fbf", "challenged (&#9650; below the axis)"}});
  s += "<h2>Challenge probabilities</h2>\n" + challenge_table(v.plan);
  return s + html::page_close();
}

Status write_html_report(const std::filesystem::path& path, const Verdict& verdict,
                         std::span<const double> loss, std::string_view verifier_fingerprint,
                         std::string_view next_step) {
  return write_file_atomic(path,
                           render_html_report(verdict, loss, verifier_fingerprint, next_step));
}

}  // namespace vt::verifier

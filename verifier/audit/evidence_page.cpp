#include "verifier/audit/evidence_page.h"

#include <algorithm>

#include "common/file_io.h"
#include "verifier/report/html_page.h"

namespace vt::verifier {
namespace {

using html::num;

std::string i64(std::int64_t v) { return std::to_string(v); }

// A timeline of the epoch's steps: the span the trail proves equal (green), the span where the
// divergence lies (amber) and what follows it (red), with every trail point marked.
std::string divergence_chart(const AuditFinding& f) {
  constexpr double kW = 1100, kH = 120, kLeft = 86, kRight = 20, kTop = 20, kBarH = 34;
  constexpr double kPlotW = kW - kLeft - kRight;
  const std::int64_t steps = std::max<std::int64_t>(1, f.steps);
  const auto x_of = [&](std::int64_t step) {
    return kLeft + static_cast<double>(std::clamp<std::int64_t>(step, 0, steps)) /
                       static_cast<double>(steps) * kPlotW;
  };
  const auto rect = [&](std::int64_t from, std::int64_t to, const char* colour,
                        const std::string& title) {
    return "<rect x=\"" + num(x_of(from), "%.2f") + "\" y=\"" + num(kTop, "%.0f") + "\" width=\"" +
           num(std::max(0.0, x_of(to) - x_of(from)), "%.2f") + "\" height=\"" + num(kBarH, "%.0f") +
           "\" fill=\"" + colour + "\"><title>" + html_escape(title) + "</title></rect>\n";
  };
  std::string s =
      "<svg class=\"chart\" viewBox=\"0 0 1100 120\" role=\"img\" aria-label=\"where the replay of "
      "epoch " +
      std::to_string(f.epoch) + " diverges\" xmlns=\"http://www.w3.org/2000/svg\">\n";
  // A bit-identical replay has no divergence: the whole epoch equals the commitments.
  const std::int64_t last = f.bit_identical ? steps : f.last_matching_step.value_or(0);
  const std::int64_t first = f.bit_identical ? steps : f.first_diverging_step.value_or(steps);
  if (last > 0)
    s += rect(0, last, "#2e9d4f",
              "steps 0.." + i64(last) + ": the replay equals the committed trail");
  if (first > last)
    s += rect(last, first, "#f0ad4e",
              "the divergence lies in steps " + i64(last) + ".." + i64(first));
  if (first < steps)
    s += rect(first, steps, "#e57373", "steps " + i64(first) + ".." + i64(steps) + ": after it");
  const double axis = kTop + kBarH + 6;
  s += "<line x1=\"" + num(kLeft, "%.0f") + "\" y1=\"" + num(axis, "%.0f") + "\" x2=\"" +
       num(kLeft + kPlotW, "%.0f") + "\" y2=\"" + num(axis, "%.0f") + "\" stroke=\"#444\"/>\n";
  std::vector<std::int64_t> ticks = {0, steps};
  if (f.trail_interval > 0) {
    for (std::int64_t t = f.trail_interval; t < steps; t += f.trail_interval) ticks.push_back(t);
  }
  std::sort(ticks.begin(), ticks.end());
  const std::size_t every = std::max<std::size_t>(1, (ticks.size() + 19) / 20);
  for (std::size_t i = 0; i < ticks.size(); ++i) {
    const std::string x = num(x_of(ticks[i]), "%.2f");
    s += "<line x1=\"" + x + "\" y1=\"" + num(axis, "%.0f") + "\" x2=\"" + x + "\" y2=\"" +
         num(axis + 5, "%.0f") + "\" stroke=\"#444\"/>\n";
    if (i % every == 0 || i + 1 == ticks.size()) {
      s += "<text x=\"" + x + "\" y=\"" + num(axis + 18, "%.0f") +
           "\" font-size=\"11\" text-anchor=\"middle\">" + i64(ticks[i]) + "</text>\n";
    }
  }
  s += "<text x=\"" + num(kLeft + kPlotW / 2, "%.0f") + "\" y=\"" + num(kH - 4, "%.0f") +
       "\" font-size=\"13\" text-anchor=\"middle\">training step within epoch " +
       std::to_string(f.epoch) + " (ticks: committed trail points)</text>\n";
  s += "<text x=\"" + num(kLeft - 8, "%.0f") + "\" y=\"" + num(kTop + kBarH / 2 + 4, "%.0f") +
       "\" font-size=\"12\" text-anchor=\"end\">replay</text>\n";
  return s + "</svg>\n";
}

std::string differences_table(const AuditFinding& f) {
  if (f.differences.empty()) return "";
  const std::string at = f.first_diverging_step ? "at step " + i64(*f.first_diverging_step)
                                                : "at the end of the epoch";
  html::Table t{"Sampled values that differ " + at,
                {"<tensor", "differing", "sampled", "<first differing positions"},
                {}};
  for (const TensorDifference& d : f.differences) {
    std::string positions;
    for (std::uint64_t p : d.positions)
      positions += (positions.empty() ? "" : ", ") + std::to_string(p);
    t.rows.push_back({"<code>" + html_escape(d.tensor) + "</code>", std::to_string(d.differing),
                      std::to_string(d.sampled), html_escape(positions)});
  }
  return html::table(t);
}

std::string shell_quoted(std::string_view w) {
  if (!w.empty() && w.find_first_of(" '\"$`\\") == std::string_view::npos) return std::string(w);
  std::string out = "'";
  for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string render_evidence_page(const AuditFinding& f, const EvidencePageInfo& info) {
  const std::string e = std::to_string(f.epoch);
  std::string s = html::page_open("veritrain audit of epoch " + e);
  const bool stored_unusable = !f.stored_state_problem.empty();
  const bool replayed = f.start_state_problem.empty();
  const bool unjudged = !f.irreproducible.empty();
  s += "<h1>veritrain audit of epoch " + e + ": " +
       (!replayed          ? "<span class=\"rejected\">CANNOT BE REPLAYED</span>"
        : unjudged         ? "<span class=\"inconclusive\">INCONCLUSIVE</span>"
        : !f.bit_identical ? "<span class=\"rejected\">DIVERGES</span>"
        : stored_unusable  ? "<span class=\"rejected\">STORED STATE UNUSABLE</span>"
                           : "<span class=\"accepted\">REPLAYS BIT-IDENTICALLY</span>") +
       "</h1>\n<p class=\"lead\">" + html_escape(f.summary) + ".</p>\n";
  if (!replayed) {
    s += "<p>Epoch " + e + " starts from the state the provider committed for epoch " +
         std::to_string(f.epoch - 1) + ", and the state it stores for that epoch is unusable: " +
         html_escape(f.start_state_problem) +
         ". Nobody can replay the epoch from the provider's evidence, so its work is not "
         "proven; the provider must be able to show every committed state, and evidence that is "
         "corrupt or withheld fails the task as a divergence would.</p>\n";
  }
  if (stored_unusable) {
    s += "<p>The state the provider stores for epoch " + e +
         " is not the state it committed: " + html_escape(f.stored_state_problem) +
         ". The provider must be able to show every committed state; evidence that is corrupt "
         "or withheld fails the task whatever the replay shows.</p>\n";
  }
  if (replayed && f.bit_identical) {
    s += "<p>Replaying epoch " + e +
         " from the provider's committed state before it reproduces the committed state "
         "after it byte for byte (equal Merkle roots): the provider did this epoch's work as "
         "committed.</p>\n";
  } else if (unjudged) {
    s += "<p>Replaying epoch " + e +
         " twice here, the second time in a fresh process whose memory started scrambled, gave "
         "two different results: " +
         html_escape(f.irreproducible) +
         ". A replay this machine cannot repeat is no evidence against anyone: the audit holds "
         "nothing against the provider.</p>\n";
  } else if (replayed) {
    s += "<p>Replaying epoch " + e +
         " from the provider's own committed state before it does not reach the state it "
         "committed after it. The provider signed both commitments (they are inside the evidence), "
         "so this is "
         "evidence against the provider unless the replay itself is wrong: the second opinion "
         "below, when present, "
         "replays the same epoch with an independent implementation.</p>\n";
  }
  if (replayed && !unjudged) {
    s += std::string(f.bit_identical ? "<h2>The replay against the committed trail</h2>\n"
                                     : "<h2>Where the replay diverges</h2>\n") +
         divergence_chart(f);
    s += "<p class=\"legend\"><span><i class=\"sw\" style=\"background:#2e9d4f\"></i>equal to "
         "the committed trail</span>"
         "<span><i class=\"sw\" style=\"background:#f0ad4e\"></i>the divergence lies here</span>"
         "<span><i class=\"sw\" style=\"background:#e57373\"></i>after the divergence</span></p>\n";
    s += differences_table(f);
  }
  s += "<h2>Parties and commitments</h2>\n";
  std::vector<std::pair<std::string, std::string>> facts = {
      {"provider key (SHA-256)",
       (info.provider_key.empty() ? std::string("(unread)") : info.provider_key) +
           (info.provider_key_pinned ? " (pinned with --provider-key)" : " (not pinned)")},
      {"auditor key (SHA-256)",
       info.auditor_key.empty() ? std::string("(no evidence signed)") : info.auditor_key},
      {"task_id", info.task_id},
      {"workdir read", info.workdir},
      {"committed root after epoch " + e, hex_encode(f.committed_root)},
      {"replay's root", replayed ? hex_encode(f.replay_root) : std::string("(not replayed)")},
      {"steps in the epoch", i64(f.steps)},
      {"trail interval (steps)", i64(f.trail_interval)}};
  // Portable and exact tasks compare bit for bit: a tolerance verdict would be a made-up fact.
  if (!info.bit_for_bit && replayed)
    facts.push_back({"within the task's tolerance", f.within_tolerance ? "yes" : "no"});
  s += html::facts("Who and what", facts);
  if (!f.second_opinion.is_null()) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (auto it = f.second_opinion.begin(); it != f.second_opinion.end(); ++it) {
      rows.emplace_back(it.key(), it->is_string() ? it->get<std::string>() : it->dump());
    }
    s += "<h2>Second opinion</h2>\n" + html::facts("The independent reference replay", rows);
  }
  s += "<h2>Re-checking this</h2>\n";
  if (!info.evidence_file.empty()) {
    s += "<p>The signed evidence is <code>" + html_escape(info.evidence_file) +
         "</code>. Anyone with the task and a "
         "copy of the provider's workdir re-runs the audit and compares it with what the evidence "
         "claims:</p>\n<pre>" +
         html_escape("veritrain audit --task " + shell_quoted(info.task_file) + " --workdir " +
                     shell_quoted(info.workdir) + " --check " + shell_quoted(info.evidence_file)) +
         "</pre>\n";
  } else {
    s += "<p>No signed evidence was written (give <code>--evidence FILE</code>); re-run the audit "
         "with:</p>\n<pre>" +
         html_escape("veritrain audit --task " + shell_quoted(info.task_file) + " --workdir " +
                     shell_quoted(info.workdir) + " --epoch " + e + " --evidence evidence-epoch-" +
                     e + ".json") +
         "</pre>\n";
  }
  return s + html::page_close();
}

Status write_evidence_page(const std::filesystem::path& dir, const AuditFinding& finding,
                           const EvidencePageInfo& info) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("creating " + dir.string() + ": " + ec.message());
  return write_file_atomic(dir / "report.html", render_evidence_page(finding, info));
}

}  // namespace vt::verifier

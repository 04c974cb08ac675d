#include "verifier/audit/ruling_page.h"

#include <cstdio>

#include "common/file_io.h"
#include "verifier/report/html_page.h"

namespace vt::verifier {
namespace {

std::string value_text(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string params_text(const dispute::TracedCall& call) {
  std::string out;
  for (const dispute::TracedParam& p : call.params) {
    out += (out.empty() ? "" : ", ") + p.name + " = " +
           (p.is_real ? value_text(p.real) : std::to_string(p.integer));
  }
  return out.empty() ? "(none)" : out;
}

std::string operands_table(const std::string& caption,
                           const std::vector<dispute::OperandHash>& operands) {
  html::Table t{
      caption,
      {"<operand", "<dtype", "values", "<Merkle root of its values (signed by the provider)"},
      {}};
  for (const dispute::OperandHash& o : operands) {
    t.rows.push_back({html_escape(o.name), html_escape(std::string(dispute::dtype_name(o.dtype))),
                      std::to_string(o.count),
                      o.count == 0 ? "(absent)" : "<code>" + hex_encode(o.root) + "</code>"});
  }
  return html::table(t);
}

}  // namespace

std::string render_ruling_page(const dispute::Ruling& r, const dispute::OperatorEvidence& e,
                               const RulingPageInfo& info) {
  const std::string step =
      "step " + std::to_string(e.header.step) + " of epoch " + std::to_string(e.header.epoch);
  std::string s = html::page_open("veritrain ruling on " + step);
  s += "<h1>veritrain ruling on " + html_escape(step) + ": " +
       (r.provider_correct ? "<span class=\"accepted\">FOR THE PROVIDER</span>"
                           : "<span class=\"rejected\">AGAINST THE PROVIDER</span>") +
       "</h1>\n<p class=\"lead\">" + html_escape(r.summary) + ".</p>\n";
  s += "<p>The provider trained this task and signed a trace of " + html_escape(step) + ": " +
       std::to_string(e.header.calls) +
       " operator calls, in the order they ran, with a SHA-256 hash of every input and output. "
       "An auditor replayed the same step from the provider's own committed state and found the "
       "first call at which the provider's trace departs from the replay: call " +
       std::to_string(r.call) + ", <b>" + html_escape(r.op) + "</b> (" + html_escape(e.place) +
       "). There both had the same inputs; the outputs differ. The provider then gave its values "
       "of that call's inputs and outputs, which hash to exactly what it had signed.</p>\n";
  s += "<p>This ruling recomputed that one operator from the provider's own inputs, with the "
       "arithmetic veritrain documents to the rounding (docs/portable.md; docs/dispute.md says "
       "what each operator's parameters and operands are). " +
       std::string(r.provider_correct
                       ? "Its outputs are exactly what the provider signed: the provider computed "
                         "this operator as documented, and the dispute does not stand against it "
                         "here."
                       : "Its outputs are not what the provider signed: given the inputs it "
                         "committed to, the provider's step did not compute this operator as "
                         "documented. No replay of training is needed to see it: this one call "
                         "decides it.") +
       "</p>\n";
  if (e.disputed) {
    s += "<p>The evidence does not carry the operator's whole operands: it carries one value of "
         "its output, <code>" +
         html_escape(e.disputed->output + "[" + std::to_string(e.disputed->index) + "]") +
         "</code>, and exactly the input values the documented arithmetic computes it from, each "
         "in a chunk of 1 KiB with the Merkle path to the operand's root the provider signed. "
         "The ruling is on that value.</p>\n";
  }
  s += "<h2>The operator</h2>\n";
  s += html::facts("The disputed call",
                   {{"operator", r.op},
                    {"call", std::to_string(r.call) + " of " + std::to_string(e.header.calls)},
                    {"where in the step", e.place},
                    {"parameters", params_text(e.call)}});
  s += operands_table("Inputs", e.call.inputs);
  s += operands_table("Outputs", e.call.outputs);
  if (!r.provider_correct) {
    html::Table t{"Where the provider's outputs differ",
                  {"<output", "index", "the provider signed", "the documented result"},
                  {}};
    for (const dispute::ValueDifference& d : r.examples)
      t.rows.push_back({html_escape(d.output), std::to_string(d.index), value_text(d.provider),
                        value_text(d.documented)});
    std::string differing;
    for (const std::string& d : r.differing_outputs)
      differing += (differing.empty() ? "" : "; ") + d;
    s += "<h2>The difference</h2>\n<p>Differing: " + html_escape(differing) +
         ". The first values that differ:</p>\n" + html::table(t);
  }
  s += "<h2>Parties and commitments</h2>\n";
  s += html::facts("Who and what",
                   {{"provider key (SHA-256)", e.provider.fingerprint()},
                    {"auditor key (SHA-256)", info.auditor_key},
                    {"task_id", hex_encode(e.header.task_id)},
                    {"provider's trace root (signed)", hex_encode(e.header.calls_root)},
                    {"auditor's trace root", hex_encode(e.auditor_calls_root)},
                    {"committed root before the epoch (signed)",
                     e.records.size() == 2 ? hex_encode(e.records[0].record.root)
                                           : std::string("(not in the evidence)")},
                    {"committed root after the epoch (signed)",
                     e.records.size() == 2 ? hex_encode(e.records[1].record.root)
                                           : std::string("(not in the evidence)")}});
  s += "<h2>Re-checking this</h2>\n<p>The evidence holds everything this page says, signed by "
       "the auditor, with the provider's signature over its trace. Anyone re-checks it alone, "
       "without the task, the data or LibTorch:</p>\n<pre>" +
       html_escape("veritrain referee " + info.evidence_file + "\nreference/referee_ref.py " +
                   info.evidence_file + "   # numpy alone, from docs/portable.md") +
       "</pre>\n";
  return s + html::page_close();
}

Status write_ruling_page(const std::filesystem::path& dir, const dispute::Ruling& ruling,
                         const dispute::OperatorEvidence& evidence, const RulingPageInfo& info) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("creating " + dir.string() + ": " + ec.message());
  return write_file_atomic(dir / "report.html", render_ruling_page(ruling, evidence, info));
}

}  // namespace vt::verifier

#pragma once
// report.html: the verdict for people (docs/verdict.md, "report.html"). One sentence says the
// result and what it proves; then what to do next on a rejection (the exact `veritrain audit`
// command), how the check probability was chosen and what it guarantees, both parties' keys,
// every check against its thresholds, verified and claimed metrics, the loss curve, per-epoch
// tracking-fingerprint movement with boosted epochs marked, and each epoch's challenge
// probability. Self-contained and escaped as html_page.h describes.

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/log.h"
#include "verifier/report/html_page.h"
#include "verifier/report/verdict.h"

namespace vt::verifier {

// `loss[e]` is epoch e's mean training loss (epoch 0, the initial state, is not plotted).
// `verifier_fingerprint` is PublicKey::fingerprint() of the signing key, or empty.
// `next_step`: on a rejection, the command a person runs next (an audit of the first failed
// epoch), shown verbatim; empty when there is none to suggest.
std::string render_html_report(const Verdict& verdict, std::span<const double> loss,
                               std::string_view verifier_fingerprint = "",
                               std::string_view next_step = "");

// Renders and writes atomically.
Status write_html_report(const std::filesystem::path& path, const Verdict& verdict,
                         std::span<const double> loss, std::string_view verifier_fingerprint = "",
                         std::string_view next_step = "");

}  // namespace vt::verifier

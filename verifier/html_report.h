#pragma once
// report.html: one self-contained page for people (inline CSS and SVG; no script, font or
// image is fetched from anywhere, so it opens offline and cannot phone home). It shows the
// result and its reasons, the loss curve, per-epoch tracking-fingerprint movement with the
// boosted epochs marked, which epochs were challenged and with what probability, and each
// check's distances against its thresholds. Every piece of text is HTML-escaped.

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/log.h"
#include "verifier/report.h"

namespace vt::verifier {

// metrics.loss of each record, indexed by epoch (records[i] is epoch i); NaN where absent.
std::vector<double> losses_from_log(std::span<const SignedRecord> records);

// `loss[e]` is epoch e's mean training loss (epoch 0, the initial state, is not plotted).
// `verifier_fingerprint` is PublicKey::fingerprint() of the signing key, or empty.
std::string render_html_report(const Verdict& verdict, std::span<const double> loss,
                               std::string_view verifier_fingerprint = "");

// Renders and writes atomically.
Status write_html_report(const std::filesystem::path& path, const Verdict& verdict, std::span<const double> loss,
                         std::string_view verifier_fingerprint = "");

// &, <, >, " and ' as entities.
std::string html_escape(std::string_view text);

}  // namespace vt::verifier

#pragma once
// The referee's page (`referee EVIDENCE --report DIR`, `dispute ... --report DIR` write
// DIR/report.html): one operator call of one training step, what the provider signed for it,
// what the documented arithmetic gives, and the ruling, in words an arbiter who has never run
// veritrain reads. The same kind of page as the audit's (html_page.h): self-contained, escaped.

#include <filesystem>
#include <string>

#include "dispute/referee.h"

namespace vt::verifier {

struct RulingPageInfo {
  std::string evidence_file;  // the operator evidence ruled on
  std::string auditor_key;    // SHA-256 of the key that signed the evidence
};

std::string render_ruling_page(const dispute::Ruling& ruling,
                               const dispute::OperatorEvidence& evidence,
                               const RulingPageInfo& info);

// Creates `dir` if needed and writes DIR/report.html atomically.
Status write_ruling_page(const std::filesystem::path& dir, const dispute::Ruling& ruling,
                         const dispute::OperatorEvidence& evidence, const RulingPageInfo& info);

}  // namespace vt::verifier

#pragma once
// The auditor's page (`audit --report DIR` writes DIR/report.html): what the audit of one
// disputed epoch found, for an arbiter who reads rather than parses evidence.json. The same
// kind of page as report.html (html_page.h): self-contained, escaped, no script.

#include <filesystem>
#include <string>

#include "verifier/audit/audit.h"

namespace vt::verifier {

struct EvidencePageInfo {
  std::string task_id;       // hex
  std::string task_file;     // as the auditor gave it, for the re-check command
  std::string workdir;       // the provider's workdir the audit read
  std::string provider_key;  // SHA-256 of the key that signed the log
  bool provider_key_pinned = false;
  std::string auditor_key;    // SHA-256 of the auditor's key; empty when no evidence was signed
  std::string evidence_file;  // the signed evidence written beside, or empty
  bool bit_for_bit = true;    // portable or exact arithmetic: no tolerance to speak of
};

std::string render_evidence_page(const AuditFinding& finding, const EvidencePageInfo& info);

// Creates `dir` if needed and writes DIR/report.html atomically.
Status write_evidence_page(const std::filesystem::path& dir, const AuditFinding& finding,
                           const EvidencePageInfo& info);

}  // namespace vt::verifier

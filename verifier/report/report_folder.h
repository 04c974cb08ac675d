#pragma once
// What `verify --report DIR` (and `demo`) leave behind: DIR/verdict.json, signed, and
// DIR/report.html, written the same way by every command that judges a provider.

#include <filesystem>
#include <string>
#include <string_view>

#include "protocol/keys.h"
#include "verifier/report/verdict.h"

namespace vt::verifier {

// On a rejection, the exact command that audits the first epoch whose replay failed:
//   veritrain audit --task TASK --workdir WORKDIR --epoch E --provider-key KEY
//                   --evidence evidence-epoch-E.json --report audit-epoch-E
// `workdir` is the provider's workdir (or a copy); when the verifier read the provider over the
// network it does not know it, and the command says PROVIDER_WORKDIR instead. When no epoch
// failed (the log itself was wrong), the `veritrain log verify` command that names the log's
// problems. Empty for an accepted or inconclusive verdict.
std::string next_step_command(const Verdict& verdict, std::string_view task_file,
                              std::string_view workdir);

// Creates `dir` if needed and writes verdict.json (signed with `key`) and report.html (with the
// verdict's claimed losses and `next_step`), each atomically.
Status write_report_folder(const std::filesystem::path& dir, const Verdict& verdict,
                           const SigningKey& key, std::string_view next_step);

}  // namespace vt::verifier

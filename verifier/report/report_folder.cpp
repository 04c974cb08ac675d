#include "verifier/report/report_folder.h"

#include "verifier/report/html_report.h"

namespace vt::verifier {
namespace {

// A word the shell reads back unchanged: as is when it holds only safe characters, else in
// single quotes.
std::string shell_word(std::string_view w) {
  const bool safe =
      !w.empty() && w.find_first_not_of(
                        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                        "_-./:=,+@%") == std::string_view::npos;
  if (safe) return std::string(w);
  std::string out = "'";
  for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string next_step_command(const Verdict& v, std::string_view task_file,
                              std::string_view workdir) {
  if (v.accepted || v.inconclusive) return "";
  const EpochCheck* failed = nullptr;
  for (const EpochCheck& c : v.checks) {
    if (!c.passed && !c.inconclusive()) {  // an epoch not judged is nothing to audit
      failed = &c;
      break;
    }
  }
  const std::string folder =
      workdir.empty() ? std::string("PROVIDER_WORKDIR") : shell_word(workdir);
  // The key the log should be signed with: the one that signed it, else the one pinned.
  const std::string& key = v.provider_key.empty() ? v.provider_key_given : v.provider_key;
  const std::string with_key = key.empty() ? "" : " --provider-key " + shell_word(key);
  if (failed == nullptr) return "veritrain log verify --workdir " + folder + with_key;
  const std::string e = std::to_string(failed->epoch);
  std::string cmd = "veritrain audit --task " + shell_word(task_file) + " --workdir " + folder +
                    " --epoch " + e + with_key;
  return cmd + " --evidence evidence-epoch-" + e + ".json --report audit-epoch-" + e;
}

Status write_report_folder(const std::filesystem::path& dir, const Verdict& verdict,
                           const SigningKey& key, std::string_view next_step) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("creating " + dir.string() + ": " + ec.message());
  VT_RETURN_IF_ERROR(write_verdict_file(dir / "verdict.json", verdict, key));
  return write_html_report(dir / "report.html", verdict, verdict.claimed_loss,
                           key.public_key().fingerprint(), next_step);
}

}  // namespace vt::verifier

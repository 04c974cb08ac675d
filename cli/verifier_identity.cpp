// The verifier's signing key and the pinned provider key, for `verify` and `audit`.
#include "cli/verifier_identity.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "common/file_io.h"
#include "protocol/log.h"
#include "verifier/check/log_check.h"
#include "verifier/check/provider_key.h"

namespace vt::cli {
namespace {
namespace fs = std::filesystem;

// One verifier names one key across its verdicts: $XDG_CONFIG_HOME/veritrain/verifier (or
// ~/.config/...).
Result<fs::path> default_key_dir() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  fs::path base;
  if (xdg != nullptr && *xdg == '/') {
    base = xdg;
  } else if (home != nullptr && *home == '/') {
    base = fs::path(home) / ".config";
  } else {
    return invalid_input(
        "no $XDG_CONFIG_HOME or $HOME to keep the verifier key in: give --key DIR");
  }
  return base / "veritrain" / "verifier";
}

}  // namespace

Result<SigningKey> verifier_key(const std::string& key_dir) {
  fs::path dir;
  if (key_dir.empty()) {
    VT_ASSIGN_OR_RETURN(dir, default_key_dir());
  } else {
    dir = key_dir;
  }
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    // A bare folder name (--key keys) has no parent to make: create_directories("") fails.
    if (!dir.parent_path().empty()) fs::create_directories(dir.parent_path(), ec);
    if (ec) return io_error("creating " + dir.parent_path().string() + ": " + ec.message());
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return io_error(errno_text(errno, "creating", dir));
    spdlog::info("verifier key: creating {} (used for every later verdict)", dir.string());
  }
  return load_or_create_signing_key(dir);
}

Result<std::optional<std::string>> pinned_provider_key(const std::string& arg,
                                                       const char* command) {
  if (arg.empty()) {
    spdlog::warn(
        "{}: no --provider-key: any key that signed the log is taken, and the verdict says it was "
        "not pinned",
        command);
    return std::optional<std::string>();
  }
  VT_ASSIGN_OR_RETURN(std::string key, verifier::parse_provider_key(arg));
  return std::optional<std::string>(key);
}

Status check_log_signer(verifier::EvidenceSource& source, const Task& task,
                        const std::optional<std::string>& pinned) {
  if (!pinned) return {};
  VT_ASSIGN_OR_RETURN(std::vector<SignedRecord> records, source.log());
  auto checked = verify_log(records, task_id(task));
  if (!checked) return rejected(checked.error().message);
  if (checked->signer_fingerprint != *pinned) {
    return rejected("the log is signed by key " + checked->signer_fingerprint +
                    ", not by the provider key given with "
                    "--provider-key (" +
                    *pinned + ")");
  }
  return {};
}

}  // namespace vt::cli

// --provider-key's parsing, on its own: `log verify` in the light `veritrain` needs it without
// the rest of log_check.cpp, whose initial-state check replays (and so links LibTorch).
#include "verifier/check/provider_key.h"

#include <cctype>
#include <filesystem>

#include "protocol/keys.h"

namespace vt::verifier {

Result<std::string> parse_provider_key(const std::string& file_or_sha256, std::string_view option) {
  std::string s = file_or_sha256;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos) return s;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file_or_sha256, ec)) {
    return invalid_input(std::string(option) + " " + file_or_sha256 +
                         ": expected a signing.pub.pem or the key's SHA-256 (64 hex digits)");
  }
  auto key = PublicKey::load(file_or_sha256);
  if (!key) return invalid_input(std::string(option) + ": " + key.error().message);
  return key->fingerprint();
}

}  // namespace vt::verifier

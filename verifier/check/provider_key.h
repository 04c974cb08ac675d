#pragma once
// The provider key a verifier pins (docs/verifier.md, "Trust").

#include <string>
#include <string_view>

#include "common/result.h"

namespace vt::verifier {

// The provider key a verifier is given: a PEM public key file (keygen's signing.pub.pem) or the
// key's SHA-256 fingerprint (64 hex digits). Returns the fingerprint. `option` names the flag in
// errors.
Result<std::string> parse_provider_key(const std::string& file_or_sha256,
                                       std::string_view option = "--provider-key");

}  // namespace vt::verifier

#pragma once
// SHA-256 through OpenSSL's EVP interface. The digest algorithm is fetched once per process:
// OpenSSL 3 otherwise repeats a provider lookup on every EVP_DigestInit, which dominates for
// the many small hashes that Merkle trees and PRF streams make.

#include <memory>

#include "common/bytes.h"

struct evp_md_ctx_st;

namespace vt {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  Sha256& update(ByteSpan bytes);
  Sha256& update(std::string_view s) { return update(as_bytes(s)); }
  // Returns the digest and resets the state so the object can hash again.
  Digest finish();

 private:
  evp_md_ctx_st* ctx_;
};

Digest sha256(ByteSpan bytes);
inline Digest sha256(std::string_view s) { return sha256(as_bytes(s)); }

}  // namespace vt

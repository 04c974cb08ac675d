#pragma once
// SHA-256 through OpenSSL's EVP interface. The digest algorithm is fetched once per process:
// OpenSSL 3 otherwise repeats a provider lookup on every EVP_DigestInit, which dominates for
// the many small hashes that Merkle trees and PRF streams make.

#include <initializer_list>
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

// SHA-256 of the concatenation of `parts`, for the many small hashes of Merkle trees: OpenSSL 3's
// EVP interface costs about 0.3 µs a digest, as much as hashing 500 bytes, and a tree over 1 KiB
// leaves (a step trace's operands) makes one digest per leaf and one per node. This goes through
// OpenSSL's SHA256_* functions (deprecated in 3.0, still shipped; the same assembly underneath),
// at a few ns a digest.
Digest sha256_of_parts(std::initializer_list<ByteSpan> parts);
inline Digest sha256(std::string_view s) { return sha256(as_bytes(s)); }

}  // namespace vt

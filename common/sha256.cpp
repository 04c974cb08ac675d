#include "common/sha256.h"

#include <openssl/evp.h>
#include <openssl/sha.h>

#include <cstdlib>
#include <stdexcept>

namespace vt {
namespace {

const EVP_MD* sha256_md() {
  // Fetched once; never freed, it lives as long as the process.
  static const EVP_MD* md = [] {
    EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    if (fetched == nullptr) std::abort();  // OpenSSL without SHA-256 cannot run veritrain
    return fetched;
  }();
  return md;
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_, sha256_md(), nullptr) != 1) std::abort();
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

Sha256::Sha256(Sha256&& other) noexcept : ctx_(other.ctx_) { other.ctx_ = nullptr; }

Sha256& Sha256::operator=(Sha256&& other) noexcept {
  if (this != &other) {
    EVP_MD_CTX_free(ctx_);
    ctx_ = other.ctx_;
    other.ctx_ = nullptr;
  }
  return *this;
}

Sha256& Sha256::update(ByteSpan bytes) {
  if (!bytes.empty()) EVP_DigestUpdate(ctx_, bytes.data(), bytes.size());
  return *this;
}

Digest Sha256::finish() {
  Digest out;
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_, out.data(), &len);
  EVP_DigestInit_ex(ctx_, sha256_md(), nullptr);
  return out;
}

Digest sha256(ByteSpan bytes) {
  Digest out;
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), out.data(), &len, sha256_md(), nullptr);
  return out;
}

// SHA256_Init and friends: deprecated in OpenSSL 3, kept for their speed. The warning is
// silenced here rather than with OPENSSL_SUPPRESS_DEPRECATED, which does nothing when another
// file of the same unity batch included an OpenSSL header first.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
Digest sha256_of_parts(std::initializer_list<ByteSpan> parts) {
  SHA256_CTX ctx;
  SHA256_Init(&ctx);
  for (ByteSpan part : parts)
    if (!part.empty()) SHA256_Update(&ctx, part.data(), part.size());
  Digest out;
  SHA256_Final(out.data(), &ctx);
  return out;
}
#pragma GCC diagnostic pop

}  // namespace vt

#pragma once
// Identities: an Ed25519 signing key (commitments, verdicts, evidence) and a TLS key and
// self-signed certificate for the provider service. A key folder holds
//   signing.key.pem (0600)  signing.pub.pem  tls.key.pem (0600)  tls.cert.pem
// in PEM (PKCS#8 / SubjectPublicKeyInfo / X.509), so the openssl CLI reads all of them.

#include <filesystem>
#include <memory>

#include "common/bytes.h"

struct evp_pkey_st;

namespace vt {

struct PkeyDeleter {
  void operator()(evp_pkey_st* key) const;
};
using PkeyPtr = std::unique_ptr<evp_pkey_st, PkeyDeleter>;

inline constexpr std::size_t kEd25519PublicKeySize = 32;
inline constexpr std::size_t kEd25519SignatureSize = 64;

class PublicKey {
 public:
  static Result<PublicKey> from_raw(ByteSpan raw32);
  static Result<PublicKey> from_pem(std::string_view pem, std::string_view what);
  static Result<PublicKey> load(const std::filesystem::path& pem_file);

  bool verify(ByteSpan message, ByteSpan signature) const;
  const Bytes& raw() const { return raw_; }
  // SHA-256 of the raw 32-byte key, hex: what people compare and logs quote.
  std::string fingerprint() const;
  std::string to_pem() const;

 private:
  Bytes raw_;  // the EVP key is rebuilt per verify: cheap, and keeps PublicKey copyable
};

class SigningKey {
 public:
  static Result<SigningKey> generate();
  static Result<SigningKey> load(const std::filesystem::path& pem_file);

  Bytes sign(ByteSpan message) const;  // 64-byte Ed25519 signature
  const PublicKey& public_key() const { return public_key_; }
  std::string to_pem() const;  // PKCS#8

 private:
  PkeyPtr key_;
  PublicKey public_key_;
};

struct KeyFiles {
  std::filesystem::path signing_key, signing_pub, tls_key, tls_cert;
  static KeyFiles in(const std::filesystem::path& dir);
};

struct IdentitySummary {
  std::string signing_fingerprint;   // SHA-256 of the raw Ed25519 public key
  std::string tls_cert_fingerprint;  // SHA-256 of the certificate's DER: what clients pin
};

// Creates all four files in `dir` (created if needed); refuses if any of them exists.
Result<IdentitySummary> generate_identity(const std::filesystem::path& dir);

// Loads the signing key from `dir`, generating the identity there first if it has none.
Result<SigningKey> load_or_create_signing_key(const std::filesystem::path& dir);

// SHA-256 of a PEM certificate's DER encoding, hex.
Result<std::string> certificate_fingerprint(const std::filesystem::path& cert_pem);

}  // namespace vt

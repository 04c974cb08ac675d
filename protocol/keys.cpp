#include "protocol/keys.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <system_error>

#include "common/file_io.h"
#include "common/sha256.h"

namespace vt {
namespace fs = std::filesystem;

void PkeyDeleter::operator()(evp_pkey_st* key) const { EVP_PKEY_free(key); }

namespace {

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

std::string bio_to_string(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(len));
}

Result<PkeyPtr> generate_key(const char* algorithm) {
  EVP_PKEY* key = nullptr;
  if (std::string_view(algorithm) == "EC") {
    key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  } else {
    key = EVP_PKEY_Q_keygen(nullptr, nullptr, algorithm);
  }
  if (key == nullptr)
    return internal_error(std::string("OpenSSL could not generate a ") + algorithm + " key");
  return PkeyPtr(key);
}

std::string private_pem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  return bio_to_string(bio.get());
}

// A self-signed certificate for the TLS key, valid for localhost and 127.0.0.1 by name; clients
// pin its SHA-256 rather than trust a CA, so the names matter little.
Result<std::string> self_signed_certificate(EVP_PKEY* key) {
  X509Ptr cert(X509_new());
  X509_set_version(cert.get(), 2);
  Bytes serial_bytes(16);
  if (RAND_bytes(serial_bytes.data(), 16) != 1) return internal_error("OpenSSL RAND_bytes failed");
  serial_bytes[0] &= 0x7f;  // a positive serial, as RFC 5280 asks
  BIGNUM* serial = BN_bin2bn(serial_bytes.data(), 16, nullptr);
  BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert.get()));
  BN_free(serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 10L * 365 * 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("veritrain-provider"), -1, -1,
                             0);
  X509_set_issuer_name(cert.get(), name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  X509_EXTENSION* san =
      X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1");
  if (san == nullptr) return internal_error("OpenSSL could not build the certificate's names");
  X509_add_ext(cert.get(), san, -1);
  X509_EXTENSION_free(san);
  if (X509_sign(cert.get(), key, EVP_sha256()) == 0) {
    return internal_error("OpenSSL could not sign the TLS certificate");
  }
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert.get());
  return bio_to_string(bio.get());
}

Result<PkeyPtr> read_private_pem(const fs::path& file) {
  VT_ASSIGN_OR_RETURN(std::string pem, read_secret_file(file, 1 << 20));
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
  if (key == nullptr) return invalid_input(file.string() + ": not a PEM private key");
  return PkeyPtr(key);
}

Bytes raw_public(EVP_PKEY* key) {
  Bytes raw(kEd25519PublicKeySize);
  std::size_t len = raw.size();
  EVP_PKEY_get_raw_public_key(key, raw.data(), &len);
  return raw;
}

}  // namespace

Result<PublicKey> PublicKey::from_raw(ByteSpan raw32) {
  if (raw32.size() != kEd25519PublicKeySize) {
    return invalid_input("Ed25519 public key must be 32 bytes, got " +
                         std::to_string(raw32.size()));
  }
  PublicKey pk;
  pk.raw_.assign(raw32.begin(), raw32.end());
  return pk;
}

Result<PublicKey> PublicKey::from_pem(std::string_view pem, std::string_view what) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  if (!key || EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519) {
    return invalid_input(std::string(what) + ": not a PEM Ed25519 public key");
  }
  return from_raw(raw_public(key.get()));
}

Result<PublicKey> PublicKey::load(const fs::path& pem_file) {
  VT_ASSIGN_OR_RETURN(std::string pem, read_text_file(pem_file, 1 << 20));
  return from_pem(pem, pem_file.string());
}

bool PublicKey::verify(ByteSpan message, ByteSpan signature) const {
  if (signature.size() != kEd25519SignatureSize) return false;
  PkeyPtr key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, raw_.data(), raw_.size()));
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!key || !ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
    return false;
  }
  return EVP_DigestVerify(ctx.get(), signature.data(), signature.size(), message.data(),
                          message.size()) == 1;
}

std::string PublicKey::fingerprint() const { return hex_encode(sha256(raw_)); }

std::string PublicKey::to_pem() const {
  PkeyPtr key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, raw_.data(), raw_.size()));
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PUBKEY(bio.get(), key.get());
  return bio_to_string(bio.get());
}

Result<SigningKey> SigningKey::generate() {
  VT_ASSIGN_OR_RETURN(PkeyPtr key, generate_key("ED25519"));
  SigningKey sk;
  VT_ASSIGN_OR_RETURN(sk.public_key_, PublicKey::from_raw(raw_public(key.get())));
  sk.key_ = std::move(key);
  return sk;
}

Result<SigningKey> SigningKey::load(const fs::path& pem_file) {
  VT_ASSIGN_OR_RETURN(PkeyPtr key, read_private_pem(pem_file));
  if (EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519) {
    return invalid_input(pem_file.string() + ": not an Ed25519 private key");
  }
  SigningKey sk;
  VT_ASSIGN_OR_RETURN(sk.public_key_, PublicKey::from_raw(raw_public(key.get())));
  sk.key_ = std::move(key);
  return sk;
}

Bytes SigningKey::sign(ByteSpan message) const {
  Bytes sig(kEd25519SignatureSize);
  std::size_t len = sig.size();
  MdCtxPtr ctx(EVP_MD_CTX_new());
  EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get());
  EVP_DigestSign(ctx.get(), sig.data(), &len, message.data(), message.size());
  return sig;
}

std::string SigningKey::to_pem() const { return private_pem(key_.get()); }

KeyFiles KeyFiles::in(const fs::path& dir) {
  return {dir / "signing.key.pem", dir / "signing.pub.pem", dir / "tls.key.pem",
          dir / "tls.cert.pem"};
}

Result<std::string> certificate_fingerprint(const fs::path& cert_pem) {
  VT_ASSIGN_OR_RETURN(std::string pem, read_text_file(cert_pem, 1 << 20));
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return invalid_input(cert_pem.string() + ": not a PEM certificate");
  unsigned char* der = nullptr;
  int len = i2d_X509(cert.get(), &der);
  if (len <= 0) return internal_error("could not encode " + cert_pem.string());
  std::string fp = hex_encode(sha256(ByteSpan(der, static_cast<std::size_t>(len))));
  OPENSSL_free(der);
  return fp;
}

Result<IdentitySummary> generate_identity(const fs::path& dir) {
  KeyFiles files = KeyFiles::in(dir);
  for (const fs::path& f : {files.signing_key, files.signing_pub, files.tls_key, files.tls_cert}) {
    if (fs::exists(f)) {
      return invalid_input(f.string() + " already exists; refusing to overwrite a key");
    }
  }
  std::error_code ec;
  const bool existed = fs::exists(dir);
  fs::create_directories(dir, ec);
  if (ec) return io_error("creating " + dir.string() + ": " + ec.message());
  // mkdir applies the umask, which may be 000: the key folder is made private explicitly. A
  // folder that existed before is the user's to keep as it is; the keys in it are 0600 anyway.
  if (!existed) {
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
    if (ec) return io_error("making " + dir.string() + " private (0700): " + ec.message());
  }
  VT_ASSIGN_OR_RETURN(SigningKey signing, SigningKey::generate());
  VT_ASSIGN_OR_RETURN(PkeyPtr tls_key, generate_key("EC"));
  VT_ASSIGN_OR_RETURN(std::string cert, self_signed_certificate(tls_key.get()));
  // Private keys first: a crash in between leaves no public half without its private key.
  VT_RETURN_IF_ERROR(
      write_file_atomic(files.signing_key, signing.to_pem(), 0600, Overwrite::kRefuse));
  VT_RETURN_IF_ERROR(
      write_file_atomic(files.tls_key, private_pem(tls_key.get()), 0600, Overwrite::kRefuse));
  VT_RETURN_IF_ERROR(write_file_atomic(files.signing_pub, signing.public_key().to_pem(), 0644,
                                       Overwrite::kRefuse));
  VT_RETURN_IF_ERROR(write_file_atomic(files.tls_cert, cert, 0644, Overwrite::kRefuse));
  VT_ASSIGN_OR_RETURN(std::string cert_fp, certificate_fingerprint(files.tls_cert));
  return IdentitySummary{signing.public_key().fingerprint(), cert_fp};
}

Result<SigningKey> load_or_create_signing_key(const fs::path& dir) {
  KeyFiles files = KeyFiles::in(dir);
  if (!fs::exists(files.signing_key)) {
    VT_RETURN_IF_ERROR(generate_identity(dir));
  }
  return SigningKey::load(files.signing_key);
}

}  // namespace vt

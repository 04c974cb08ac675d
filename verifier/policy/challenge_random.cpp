// The randomness challenges are drawn from: a secret seed from the OS, or one given to reproduce
// a run, expanded into one stream per verify (docs/plan.md, "Randomness").
#include "verifier/policy/challenge_random.h"

#include <openssl/rand.h>

#include "common/sha256.h"

namespace vt::verifier {
namespace {

constexpr std::string_view kStreamDomain = "veritrain/challenge/v1";
constexpr std::size_t kSecretSeedBytes = 32;
constexpr std::size_t kMaxSeedBytes = 64;

}  // namespace

namespace {

Bytes challenge_prefix(const Bytes& seed) {
  Bytes prefix(kStreamDomain.begin(), kStreamDomain.end());
  append_bytes(prefix, seed);
  return prefix;
}

}  // namespace

ChallengeRandom::ChallengeRandom(const Bytes& seed, std::string seed_hex)
    : seed_hex_(std::move(seed_hex)), stream_(challenge_prefix(seed)) {}

Result<ChallengeRandom> ChallengeRandom::from_os() {
  Bytes seed(kSecretSeedBytes);
  if (RAND_bytes(seed.data(), static_cast<int>(seed.size())) != 1) {
    return io_error("challenge seed: OpenSSL RAND_bytes could not read the OS CSPRNG");
  }
  return ChallengeRandom(seed, "");
}

Result<ChallengeRandom> ChallengeRandom::from_seed_hex(std::string_view hex) {
  Result<Bytes> seed = hex_decode(hex);
  if (!seed.ok()) return invalid_input("--seed: " + seed.error().message);
  if (seed->empty() || seed->size() > kMaxSeedBytes) {
    return invalid_input("--seed: expected 1 to 64 bytes of hex, got " +
                         std::to_string(seed->size()) + " bytes");
  }
  std::string canonical = hex_encode(*seed);
  return ChallengeRandom(*seed, std::move(canonical));
}

}  // namespace vt::verifier

// libFuzzer target for the evidence reader (verifier/audit.h, check_evidence up to the replay):
// any text is refused with an error or reaches the re-audit, never a crash or an exception.
// The auditor's signature gates everything after it, so each input is also tried re-signed with
// a fixed key: that is how an auditor's own malformed file looks to a checker.
//
// The replay is out of scope (and needs LibTorch): the source serves no log, and the trainer
// symbols audit.cpp and epoch_check.cpp reference are link seams that only return errors.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "training/live_fingerprint.h"
#include "verifier/audit.h"

namespace vt::training {
struct Trainer::Impl {};
Trainer::~Trainer() = default;
Result<std::unique_ptr<Trainer>> Trainer::restore(const Task&, ByteSpan, const TrainerOptions&) {
  return internal_error("fuzz: no trainer");
}
Result<EpochSummary> Trainer::train_epoch(const EpochHooks&) {
  return internal_error("fuzz: no trainer");
}
Result<Bytes> Trainer::snapshot() const { return internal_error("fuzz: no trainer"); }
const std::vector<std::string>& Trainer::replay_notes() const {
  static const std::vector<std::string> none;
  return none;
}
}  // namespace vt::training

namespace vt::provider {
Result<fp::Fingerprint> gather_live(const training::Trainer&, fp::SamplePlan) {
  return internal_error("fuzz: no trainer");
}
}  // namespace vt::provider

namespace {

class NoSource final : public vt::verifier::EvidenceSource {
 public:
  vt::Result<std::string> task_json() override { return vt::io_error("fuzz: no task"); }
  vt::Result<std::vector<vt::SignedRecord>> log() override {
    return std::vector<vt::SignedRecord>{};
  }
  vt::Result<vt::Bytes> snapshot(
      std::uint64_t, const vt::Digest&,
      const std::optional<std::pair<vt::Digest, vt::ByteSpan>>&) override {
    return vt::io_error("fuzz: no snapshots");
  }
  std::uint64_t bytes_fetched() const override { return 0; }
  std::string describe() const override { return "fuzz"; }
};

const vt::SigningKey& auditor() {
  static const vt::SigningKey key = *vt::SigningKey::generate();
  return key;
}

vt::Task fuzz_task() {
  vt::Task t;
  t.model.name = "mlp";
  t.dataset.name = "synthetic";
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const vt::Task task = fuzz_task();
  NoSource source;
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)vt::verifier::check_evidence(text, source, task, {});
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("evidence")) return 0;
  doc["signature"] =
      vt::hex_encode(auditor().sign(vt::as_bytes(vt::canonical_json(doc["evidence"]))));
  doc["signer"] = vt::hex_encode(auditor().public_key().raw());
  (void)vt::verifier::check_evidence(doc.dump(), source, task, {});
  return 0;
}

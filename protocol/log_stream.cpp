// A provider's log checked record by record as it is read (LogBounds, LogStreamCheck).
#include "protocol/log.h"

namespace vt {

std::string log_position(std::uint64_t epoch) {
  return "epoch " + std::to_string(epoch) + " (line " + std::to_string(epoch + 1) + ")";
}

Status LogStreamCheck::admit(std::uint64_t bytes, std::string_view where) const {
  const std::string at = std::string(where) + ": " + log_position(next_);
  if (next_ - first_ >= bounds_.records) {
    return rejected(at + ": the log goes on past the " + std::to_string(bounds_.records) +
                    " records the task allows (epochs 0 to " +
                    std::to_string(first_ + bounds_.records - 1) + ")");
  }
  if (bytes > bounds_.record_bytes) {
    return rejected(at + ": a record of " + std::to_string(bytes) +
                    " bytes, more than a record of this task can take (" +
                    std::to_string(bounds_.record_bytes) + ")");
  }
  return {};
}

Status LogStreamCheck::accept(const SignedRecord& r, std::string_view where) {
  const std::string at = std::string(where) + ": " + log_position(next_);
  if (r.record.epoch != next_) {
    return rejected(at + ": commits epoch " + std::to_string(r.record.epoch) + " where epoch " +
                    std::to_string(next_) + " belongs (epochs run 0, 1, 2, ... without gaps)");
  }
  auto key = PublicKey::from_raw(r.record.signer);
  if (!key) return rejected(at + ": signer is not a valid Ed25519 key");
  if (signer_ && key->raw() != signer_->raw()) {
    return rejected(at + ": signed by key " + key->fingerprint() + ", but the log's earlier " +
                    "records by " + signer_->fingerprint() + " (one signer throughout)");
  }
  if (!key->verify(as_bytes(r.body), r.signature))
    return rejected(at + ": signature does not verify (the record was changed after signing)");
  // A read that starts past epoch 0 has no earlier record to chain to.
  if ((signer_ || next_ == 0) && r.record.prev != prev_) {
    return rejected(at + ": prev is " + hex_encode(r.record.prev) + " but " +
                    (next_ == 0 ? std::string("epoch 0 must name all zeros")
                                : "the record of epoch " + std::to_string(next_ - 1) +
                                      " hashes to " + hex_encode(prev_)) +
                    " (broken chain)");
  }
  if (!signer_) signer_ = *key;
  prev_ = r.hash;
  ++next_;
  return {};
}

}  // namespace vt

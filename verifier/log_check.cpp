#include "verifier/log_check.h"

#include <algorithm>

#include "common/safetensors.h"
#include "fingerprint/merkle.h"

namespace vt::verifier {
namespace {

// Compares the parameters and buffers of the committed epoch-0 snapshot with the derived ones,
// byte for byte; returns what differs, or "" when they agree.
Result<std::string> initial_weights_differ(EvidenceSource& source, const Digest& root, const Bytes& derived) {
  auto committed = source.snapshot(0, root, std::nullopt);
  if (!committed) {
    if (committed.error().code == Errc::kIo) return committed.error();
    return "its snapshot is unusable: " + committed.error().message;
  }
  VT_ASSIGN_OR_RETURN(SafetensorsView ours, parse_safetensors(derived));
  VT_ASSIGN_OR_RETURN(SafetensorsView theirs, parse_safetensors(*committed));
  for (const TensorEntry& t : ours.tensors) {
    if (t.name.rfind("param/", 0) != 0 && t.name.rfind("buffer/", 0) != 0) continue;
    const TensorEntry* other = theirs.find(t.name);
    if (other == nullptr) return "it lacks tensor " + t.name;
    ByteSpan a = ours.data(t), b = theirs.data(*other);
    if (other->dtype != t.dtype || !std::equal(a.begin(), a.end(), b.begin(), b.end())) {
      return "tensor " + t.name + " differs (a pretrained or forged start?)";
    }
  }
  return std::string();
}

}  // namespace

Result<LogFacts> check_log(EvidenceSource& source, const Task& task, const training::TrainerOptions& trainer,
                           bool require_complete) {
  LogFacts facts;
  const Digest id = task_id(task);
  // Epoch 0 must be the state the task defines; the verifier derives it itself. Its size also
  // bounds what the provider may send from here on.
  VT_ASSIGN_OR_RETURN(auto initial, training::Trainer::create(task, trainer));
  VT_ASSIGN_OR_RETURN(Bytes initial_bytes, initial->snapshot());
  source.set_limits(SourceLimits{static_cast<std::uint64_t>(task.epochs) + 1, snapshot_size_bound(initial_bytes.size())});
  auto records = source.log();
  if (!records) {
    if (records.error().code == Errc::kIo) return records.error();
    facts.failures.push_back("the commitment log is unreadable: " + records.error().message);
    return facts;
  }
  facts.records = std::move(*records);
  if (facts.records.empty()) {
    facts.failures.push_back("the commitment log is empty");
    return facts;
  }
  if (facts.records.front().record.task_id != id) {
    facts.failures.push_back("the log commits to task " + hex_encode(facts.records.front().record.task_id) +
                             ", not to this task " + hex_encode(id) + " (different hyperparameters, data or model)");
    return facts;
  }
  auto verified = verify_log(facts.records, id);
  if (!verified) {
    facts.failures.push_back(verified.error().message);
    return facts;
  }
  facts.head = verified->head;
  facts.signer_fingerprint = verified->signer_fingerprint;
  const auto committed = facts.records.size();
  const auto wanted = static_cast<std::size_t>(task.epochs) + 1;
  if (committed > wanted) {
    facts.failures.push_back("the log commits " + std::to_string(committed - 1) + " epochs, the task has " +
                             std::to_string(task.epochs));
  }
  facts.complete = committed >= wanted;
  if (require_complete && committed < wanted) {
    facts.failures.push_back("the log ends after epoch " + std::to_string(committed - 1) + " of " +
                             std::to_string(task.epochs) + ": training is incomplete");
  }

  facts.expected_initial_root = fp::merkle_root(initial_bytes);
  const Digest committed_root = facts.records.front().record.root;
  if (committed_root != facts.expected_initial_root) {
    // On another device class or thread count the metadata differs; the weights must not.
    VT_ASSIGN_OR_RETURN(std::string why, initial_weights_differ(source, committed_root, initial_bytes));
    if (!why.empty()) facts.failures.push_back("epoch 0: the committed initial state is not the one the task defines: " + why);
  }
  return facts;
}

Status check_final_model(EvidenceSource& source, const LogFacts& facts, std::vector<std::string>& failures) {
  if (facts.records.empty()) return {};
  const CommitRecord& last = facts.records.back().record;
  auto final_model = source.snapshot(last.epoch, last.root, std::nullopt);
  if (!final_model) {
    if (final_model.error().code == Errc::kIo) return final_model.error();
    failures.push_back("epoch " + std::to_string(last.epoch) + ": the delivered final model does not match the last "
                       "committed root: " + final_model.error().message);
  }
  return {};
}

}  // namespace vt::verifier

#include "verifier/check/log_check.h"

#include <algorithm>
#include <cctype>

#include "common/safetensors.h"
#include "common/text.h"
#include "fingerprint/fingerprint.h"
#include "fingerprint/merkle.h"
#include "training/zoo/sizes.h"
#include "verifier/check/environment_check.h"

namespace vt::verifier {
namespace {

// Compares the parameters and buffers of the committed epoch-0 snapshot with the derived ones,
// byte for byte; returns what differs, or "" when they agree.
Result<std::string> initial_weights_differ(EvidenceSource& source, const SignedRecord& first,
                                           const Bytes& derived, const CheckContext& ctx) {
  auto committed = source.snapshot(0, first.record.root, std::nullopt);
  if (!committed) {
    if (committed.error().code == Errc::kIo) return committed.error();
    return "its snapshot is unusable: " + committed.error().message;
  }
  if (auto problems = check_committed_state(*committed, first, ctx); !problems.empty())
    return problems.front();
  VT_ASSIGN_OR_RETURN(SafetensorsView ours, parse_safetensors(derived));
  VT_ASSIGN_OR_RETURN(SafetensorsView theirs, parse_safetensors(*committed));
  for (const TensorEntry& t : ours.tensors) {
    if (t.name.rfind("param/", 0) != 0 && t.name.rfind("buffer/", 0) != 0) continue;
    const TensorEntry* other = theirs.find(t.name);
    if (other == nullptr) return "it lacks tensor " + t.name;
    ByteSpan a = ours.data(t), b = theirs.data(*other);
    if (other->dtype != t.dtype || !std::equal(a.begin(), a.end(), b.begin(), b.end())) {
      return "tensor " + printable(t.name) + " differs (a pretrained or forged start?)";
    }
  }
  return std::string();
}

// Every record's fingerprints must sample the positions the task derives (docs/fingerprint.md):
// the plans need no snapshot, so they are checked for every epoch, challenged or not.
Status check_plans(const std::vector<SignedRecord>& records, const CheckContext& ctx,
                   std::int64_t steps, std::vector<std::string>& failures) {
  const Task& task = *ctx.task;
  const auto tracking_k = static_cast<std::uint64_t>(task.fingerprint.tracking_k);
  VT_ASSIGN_OR_RETURN(fp::SamplePlan tracking,
                      fp::plan_samples(fp::tracking_seed(ctx.task_id), ctx.layout, tracking_k));
  const std::int64_t interval = task.fingerprint.trail_interval;
  const std::size_t trail_points = interval > 0 ? static_cast<std::size_t>(steps / interval) : 0;
  for (const SignedRecord& signed_record : records) {
    const CommitRecord& r = signed_record.record;
    const std::string e = "epoch " + std::to_string(r.epoch) + ": ";
    auto plan_of = [&](const nlohmann::json& j, const char* what) -> std::optional<fp::SamplePlan> {
      auto f = fp::fingerprint_from_json(j);
      if (f) return std::move(f->plan);
      failures.push_back(e + "committed " + what + " is malformed: " + f.error().message);
      return std::nullopt;
    };
    VT_ASSIGN_OR_RETURN(fp::SamplePlan expected, expected_commitment_plan(ctx, r));
    auto committed = plan_of(r.fingerprint, "fingerprint");
    if (committed && *committed != expected) {
      failures.push_back(e +
                         "committed fingerprint samples other positions than the task derives (" +
                         std::to_string(committed->count()) + " positions over " +
                         std::to_string(committed->tensors.size()) + " tensors; the task's k is " +
                         std::to_string(expected.count()) + " over " +
                         std::to_string(expected.tensors.size()) + ")");
    }
    auto tracked = plan_of(r.tracking_fingerprint, "tracking fingerprint");
    if (tracked && *tracked != tracking) {
      failures.push_back(
          e +
          "committed tracking fingerprint samples other positions than the task derives "
          "(tracking_k " +
          std::to_string(tracking_k) + ")");
    }
    const std::size_t wanted = r.epoch == 0 ? 0 : trail_points;
    if (r.trail.size() != wanted) {
      failures.push_back(e + "the committed trail has " + std::to_string(r.trail.size()) +
                         " fingerprints, the task's epoch takes " + std::to_string(wanted));
      continue;
    }
    for (std::size_t i = 0; i < wanted; ++i) {
      const auto step = static_cast<std::uint64_t>(i + 1) * static_cast<std::uint64_t>(interval);
      VT_ASSIGN_OR_RETURN(
          fp::SamplePlan want,
          fp::plan_samples(fp::trail_seed(ctx.task_id, r.epoch, step), ctx.layout, tracking_k));
      auto got = plan_of(r.trail[i], "trail fingerprint");
      if (got && *got != want) {
        failures.push_back(e + "the committed trail fingerprint at step " + std::to_string(step) +
                           " samples other positions than the task derives");
        break;
      }
    }
  }
  return {};
}

}  // namespace

// parse_provider_key: provider_key.cpp, free of the replay code (and so of LibTorch) for
// `veritrain`.

Result<LogFacts> check_log(EvidenceSource& source, const Task& task,
                           const training::TrainerOptions& trainer, bool require_complete,
                           const std::optional<std::string>& provider_key, bool replays) {
  LogFacts facts;
  const Digest id = task_id(task);
  // Epoch 0 must be the state the task defines; the verifier derives it itself. Its size also
  // bounds what the provider may send from here on.
  VT_ASSIGN_OR_RETURN(std::shared_ptr<training::Trainer> initial,
                      training::Trainer::create(task, trainer));
  facts.trainer = initial;
  VT_ASSIGN_OR_RETURN(Bytes initial_bytes, initial->snapshot());
  SourceLimits limits;
  limits.log =
      LogBounds(static_cast<std::uint64_t>(task.epochs) + 1,
                training::record_bytes_bound(task, initial->steps_per_epoch(), initial->layout()));
  limits.snapshot_bytes = snapshot_size_bound(initial_bytes.size());
  source.set_limits(limits);
  auto records = source.log();
  if (!records) {
    if (records.error().code == Errc::kIo) return records.error();
    facts.failures.push_back("the commitment log: " + records.error().message);
    return facts;
  }
  facts.records = std::move(*records);
  if (facts.records.empty()) {
    facts.failures.push_back("the commitment log is empty");
    return facts;
  }
  if (facts.records.front().record.task_id != id) {
    // Signed by the pinned provider, it is that provider's delivery for another task.
    const bool theirs = provider_key && signed_by(facts.records, *provider_key);
    if (theirs) {
      facts.signer_fingerprint = *provider_key;
      facts.signer_pinned = true;
    }
    facts.failures.push_back(
        std::string(theirs ? "the log, signed by the pinned provider key, " : "the log ") +
        "commits to task " + hex_encode(facts.records.front().record.task_id) +
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
  if (provider_key) {
    if (facts.signer_fingerprint != *provider_key) {
      facts.failures.push_back("the log is signed by key " + facts.signer_fingerprint +
                               ", not by the provider key given with --provider-key (" +
                               *provider_key + ")");
      return facts;
    }
    facts.signer_pinned = true;
  }
  const auto committed = facts.records.size();
  const auto wanted = static_cast<std::size_t>(task.epochs) + 1;
  if (committed > wanted) {
    facts.failures.push_back("the log commits " + std::to_string(committed - 1) +
                             " epochs, the task has " + std::to_string(task.epochs));
  }
  facts.complete = committed >= wanted;
  if (require_complete && committed < wanted) {
    facts.failures.push_back("the log ends after epoch " + std::to_string(committed - 1) + " of " +
                             std::to_string(task.epochs) + ": training is incomplete");
  }

  for (std::string& f : check_committed_environments(facts.records, task))
    facts.failures.push_back(std::move(f));
  facts.layout = initial->layout();
  facts.expected_initial_root = fp::merkle_root(initial_bytes);
  const SignedRecord& first = facts.records.front();
  CheckContext ctx{&task, id, trainer, FetchAfter::kAuto, facts.layout};
  VT_RETURN_IF_ERROR(check_plans(facts.records, ctx, initial->steps_per_epoch(), facts.failures));
  if (!replays) return facts;
  if (first.record.root == facts.expected_initial_root) {
    // The verifier holds these bytes itself: the fingerprints committed for them are checked
    // without a fetch.
    for (const std::string& p : check_committed_state(initial_bytes, first, ctx))
      facts.failures.push_back("epoch 0: " + p);
  } else {
    // On another device class or thread count the metadata differs; the weights must not.
    VT_ASSIGN_OR_RETURN(std::string why, initial_weights_differ(source, first, initial_bytes, ctx));
    if (!why.empty())
      facts.failures.push_back(
          "epoch 0: the committed initial state is not the one the task defines: " + why);
  }
  return facts;
}

Status check_final_model(EvidenceSource& source, const LogFacts& facts, const CheckContext& ctx,
                         std::vector<std::string>& failures) {
  if (facts.records.empty()) return {};
  const CommitRecord& last = facts.records.back().record;
  const std::string where = "epoch " + std::to_string(last.epoch) + ": the delivered final model ";
  auto final_model = source.snapshot(last.epoch, last.root, std::nullopt);
  if (!final_model) {
    if (final_model.error().code == Errc::kIo) return final_model.error();
    failures.push_back(where +
                       "does not match the last committed root: " + final_model.error().message);
    return {};
  }
  for (const std::string& p : check_committed_state(*final_model, facts.records.back(), ctx))
    failures.push_back(where + p);
  return {};
}

}  // namespace vt::verifier

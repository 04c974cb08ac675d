#include "verifier/audit/audit.h"

#include <cstring>

#include "fingerprint/fingerprint.h"
#include "fingerprint/merkle.h"
#include "training/live_fingerprint.h"
#include "training/zoo/sizes.h"
#include "verifier/check/epoch_check.h"
#include "verifier/check/second_replay.h"

namespace vt::verifier {
namespace {

constexpr std::size_t kPositionsReported = 8;

// Per tensor, which sampled positions differ bit for bit.
std::vector<TensorDifference> differences(const fp::Fingerprint& replay,
                                          const fp::Fingerprint& committed) {
  std::vector<TensorDifference> out;
  for (std::size_t t = 0; t < committed.plan.tensors.size() && t < replay.values.size(); ++t) {
    const fp::TensorSamples& s = committed.plan.tensors[t];
    const std::size_t width = dtype_size(s.dtype);
    TensorDifference d{s.name, 0, s.indices.size(), {}};
    for (std::size_t i = 0; i < s.indices.size(); ++i) {
      if (std::memcmp(replay.values[t].data() + i * width, committed.values[t].data() + i * width,
                      width) != 0) {
        ++d.differing;
        if (d.positions.size() < kPositionsReported) d.positions.push_back(s.indices[i]);
      }
    }
    if (d.differing > 0) out.push_back(std::move(d));
  }
  return out;
}

// What is wrong with the state the provider stores for `after`'s epoch, or "" when it decodes to
// the committed root and passes the checks a verifier makes on a fetched state.
Result<std::string> stored_state_problem(EvidenceSource& source, const CheckContext& ctx,
                                         const SignedRecord& after) {
  Result<Bytes> stored = source.snapshot(after.record.epoch, after.record.root, std::nullopt);
  if (!stored) {
    if (!is_provider_fault(stored.error())) return stored.error();
    return stored.error().message;
  }
  std::vector<std::string> problems = check_committed_state(*stored, after, ctx);
  return problems.empty() ? std::string() : problems.front();
}

const SignedRecord* find_epoch(const std::vector<SignedRecord>& records, std::uint64_t epoch) {
  for (const SignedRecord& r : records) {
    if (r.record.epoch == epoch) return &r;
  }
  return nullptr;
}

}  // namespace

Result<AuditFinding> audit_epoch(EvidenceSource& source, const Task& task, std::uint64_t epoch,
                                 const training::TrainerOptions& trainer_options,
                                 const std::filesystem::path& second_replay_program) {
  if (epoch == 0)
    return invalid_input("--epoch: epoch 0 is the initial state; audit epochs 1.." +
                         std::to_string(task.epochs));
  const Digest id = task_id(task);
  VT_ASSIGN_OR_RETURN(CheckContext ctx, make_check_context(task, trainer_options));
  ctx.second_replay_program = second_replay_program;
  SourceLimits limits = limits_for(task);
  limits.log.record_bytes = training::record_bytes_bound(task, ctx.steps_per_epoch, ctx.layout);
  source.set_limits(limits);
  VT_ASSIGN_OR_RETURN(std::vector<SignedRecord> records, source.log());
  if (auto checked = verify_log(records, id); !checked) return rejected(checked.error().message);
  const SignedRecord* before = find_epoch(records, epoch - 1);
  const SignedRecord* after = find_epoch(records, epoch);
  if (before == nullptr || after == nullptr) {
    return invalid_input("--epoch " + std::to_string(epoch) + ": the log commits epochs 0.." +
                         std::to_string(records.size() - 1));
  }
  // The same checks a verifier makes before replaying (epoch_check.h). A start state the
  // provider got wrong is itself the finding: signed evidence says the epoch cannot be replayed
  // from what the provider stores, and why, so the verdict's failed epoch has an audit too.
  AuditFinding f;
  f.epoch = epoch;
  f.committed_root = after->record.root;
  f.steps = ctx.steps_per_epoch;
  f.trail_interval = task.fingerprint.trail_interval;
  Result<Bytes> stored_start = source.snapshot(epoch - 1, before->record.root, std::nullopt);
  if (!stored_start) {
    if (!is_provider_fault(stored_start.error())) return stored_start.error();
    f.start_state_problem = stored_start.error().message;
  } else if (auto problems = check_committed_state(*stored_start, *before, ctx);
             !problems.empty()) {
    f.start_state_problem = "the committed state: " + problems.front();
  }
  training::Trainer* trainer = nullptr;
  if (f.start_state_problem.empty()) {
    // Into the trainer that derived the task's layout: one trainer for the audit.
    Status loaded = load_committed(*ctx.replayer, *stored_start);
    if (!loaded && loaded.error().code == Errc::kRejected) {
      f.start_state_problem = loaded.error().message;
    } else {
      VT_RETURN_IF_ERROR(std::move(loaded));
      trainer = ctx.replayer.get();
    }
  }
  if (!f.start_state_problem.empty()) {
    VT_ASSIGN_OR_RETURN(f.stored_state_problem, stored_state_problem(source, ctx, *after));
    f.summary = "epoch " + std::to_string(epoch) + " cannot be replayed: the state the provider " +
                "stores for epoch " + std::to_string(epoch - 1) +
                ", which it starts from, is unusable: " + f.start_state_problem;
    if (!f.stored_state_problem.empty())
      f.summary += "; the state it stores for epoch " + std::to_string(epoch) +
                   " is unusable too: " + f.stored_state_problem;
    return f;
  }

  // Replay, gathering the trail at the committed positions as the steps pass.
  std::vector<fp::Fingerprint> committed_trail;
  for (const auto& t : after->record.trail) {
    auto f = fp::fingerprint_from_json(t);
    if (!f)
      return rejected("epoch " + std::to_string(epoch) +
                      ": committed trail is malformed: " + f.error().message);
    committed_trail.push_back(std::move(*f));
  }
  std::vector<fp::Fingerprint> replay_trail;
  Status gather_status;
  training::EpochHooks hooks;
  hooks.trail_every = task.fingerprint.trail_interval;
  hooks.on_trail = [&](std::int64_t, const training::Trainer& t) {
    const std::size_t i = replay_trail.size();
    if (!gather_status || i >= committed_trail.size()) return;
    auto f = provider::gather_live(t, committed_trail[i].plan);
    if (f) {
      replay_trail.push_back(std::move(*f));
    } else {
      gather_status = f.error();
    }
  };
  VT_ASSIGN_OR_RETURN(training::EpochSummary summary, trainer->train_epoch(hooks));
  VT_RETURN_IF_ERROR(std::move(gather_status));
  VT_ASSIGN_OR_RETURN(Bytes replay, trainer->snapshot());

  f.replay_root = fp::merkle_root(replay);
  f.bit_identical = f.replay_root == f.committed_root;
  f.steps = summary.steps;
  VT_ASSIGN_OR_RETURN(fp::Fingerprint committed_fp,
                      fp::fingerprint_from_json(after->record.fingerprint));
  VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(replay));
  VT_ASSIGN_OR_RETURN(fp::Fingerprint replay_fp, fp::gather(committed_fp.plan, view));
  VT_ASSIGN_OR_RETURN(fp::Comparison final_cmp,
                      fp::compare(replay_fp, committed_fp, compare_mode(task), tolerance_of(task)));
  f.within_tolerance = final_cmp.match;
  VT_ASSIGN_OR_RETURN(f.stored_state_problem, stored_state_problem(source, ctx, *after));
  if (f.bit_identical) {
    f.summary = "epoch " + std::to_string(epoch) + " replays bit-identically (root " +
                hex_encode(f.replay_root) + ")";
    if (!f.stored_state_problem.empty()) {
      f.summary +=
          ", but the state the provider stores for it is unusable: " + f.stored_state_problem +
          " (the epoch's work is proven; the evidence kept for it is not sound)";
    }
    return f;
  }
  // Only a replay this auditor reproduces may accuse (second_replay.h).
  if (compare_mode(task) == fp::CompareMode::kExact) {
    VT_ASSIGN_OR_RETURN(Replay second, replay_again(ctx, epoch, *stored_start));
    f.second_replay_root = second.root;
    Replay first;
    first.snapshot = replay;
    first.root = f.replay_root;
    first.loss = summary.mean_loss;
    if (std::string differs = state_difference(first, second); !differs.empty()) {
      f.irreproducible = irreproducible_text(epoch, differs);
      f.summary = "epoch " + std::to_string(epoch) + " is not judged: " + f.irreproducible;
      if (!f.stored_state_problem.empty())
        f.summary +=
            "; the state the provider stores for it is unusable: " + f.stored_state_problem;
      return f;
    }
  }
  f.last_matching_step = 0;
  for (std::size_t i = 0; i < committed_trail.size(); ++i) {
    const std::int64_t step = static_cast<std::int64_t>(i + 1) * f.trail_interval;
    if (i >=
        replay_trail.size()) {  // the provider committed more trail points than the task has steps
      f.first_diverging_step = step;
      break;
    }
    if (replay_trail[i] == committed_trail[i]) {
      f.last_matching_step = step;
      continue;
    }
    f.first_diverging_step = step;
    f.differences = differences(replay_trail[i], committed_trail[i]);
    break;
  }
  if (!f.first_diverging_step) {
    f.differences = differences(replay_fp, committed_fp);
    f.summary = "epoch " + std::to_string(epoch) + " diverges after the last trail point (step " +
                std::to_string(*f.last_matching_step) + "), before the end of the epoch";
  } else {
    f.summary = "epoch " + std::to_string(epoch) + " first diverges between step " +
                std::to_string(*f.last_matching_step) + " and step " +
                std::to_string(*f.first_diverging_step) + " of " + std::to_string(f.steps);
  }
  if (!f.differences.empty()) {
    f.summary += "; " + std::to_string(f.differences.size()) + " tensors differ, first " +
                 f.differences.front().tensor;
  }
  return f;
}

Result<EvidenceCheck> check_evidence(const std::string& evidence_json, EvidenceSource& source,
                                     const Task& task, const training::TrainerOptions& trainer,
                                     const std::filesystem::path& second_replay_program) {
  VT_ASSIGN_OR_RETURN(SignedEvidence evidence, read_evidence(evidence_json, task));
  EvidenceCheck check;
  check.auditor_fingerprint = std::move(evidence.auditor_fingerprint);
  check.claimed = std::move(evidence.claimed);
  VT_ASSIGN_OR_RETURN(check.recomputed, audit_epoch(source, task, check.claimed.epoch, trainer,
                                                    second_replay_program));
  check.agrees =
      check.recomputed.bit_identical == check.claimed.bit_identical &&
      check.recomputed.replay_root == check.claimed.replay_root &&
      check.recomputed.committed_root == check.claimed.committed_root &&
      check.recomputed.stored_state_problem.empty() == check.claimed.stored_state_problem.empty() &&
      check.recomputed.start_state_problem.empty() == check.claimed.start_state_problem.empty() &&
      check.recomputed.irreproducible.empty() == check.claimed.irreproducible.empty() &&
      check.recomputed.first_diverging_step == check.claimed.first_diverging_step &&
      check.recomputed.last_matching_step == check.claimed.last_matching_step;
  return check;
}

}  // namespace vt::verifier

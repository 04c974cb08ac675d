#include "verifier/check/epoch_check.h"

#include <malloc.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/safetensors.h"
#include "common/stream_file.h"
#include "fingerprint/fingerprint.h"
#include "fingerprint/merkle.h"
#include "training/eval_claim.h"
#include "training/live_fingerprint.h"
#include "verifier/check/second_replay.h"

namespace vt::verifier {
namespace {

std::string epoch_text(std::uint64_t e) { return "epoch " + std::to_string(e); }

// A plan over every element of every floating-point tensor: the whole state as a fingerprint.
fp::SamplePlan full_plan(const SafetensorsView& view) {
  fp::SamplePlan plan;
  for (const TensorEntry& t : view.tensors) {
    if (!is_floating(t.dtype) || t.numel() == 0) continue;
    fp::TensorSamples s{t.name, t.dtype, t.numel(), {}};
    s.indices.resize(t.numel());
    for (std::uint64_t i = 0; i < t.numel(); ++i) s.indices[i] = i;
    plan.tensors.push_back(std::move(s));
  }
  return plan;
}

bool same_bits(double a, double b) {
  return (!std::isfinite(a) && !std::isfinite(b)) ||
         std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

// |claimed - replayed| <= bound, where a non-finite value on either side only matches another:
// with an infinite replay, the plain difference would be infinite and pass an infinite bound.
bool within(double claimed, double replayed, double bound) {
  if (!std::isfinite(claimed) || !std::isfinite(replayed))
    return !std::isfinite(claimed) && !std::isfinite(replayed);
  return std::fabs(claimed - replayed) <= bound;
}

// Held-out metrics: the replay's bits in exact mode; in tolerance mode within the fixed bounds
// of docs/datasets.md ("Held-out evaluation"), since the weights themselves differ a little.
template <typename Fail>
void judge_eval(EpochCheck& check, const CommitMetrics& m, const Replay& replay, bool exact,
                Fail& fail) {
  check.claimed_eval = m.eval;
  check.replay_eval = replay.eval;
  if (m.eval.has_value() != replay.eval.has_value()) {
    fail(m.eval ? "the record claims held-out metrics, but the task has no eval split"
                : "the record lacks the held-out metrics of the task's eval split");
    return;
  }
  if (!m.eval) return;
  const EvalClaim &c = *m.eval, &r = *replay.eval;
  char line[200];
  if (c.examples != r.examples || c.accuracy.has_value() != r.accuracy.has_value()) {
    std::snprintf(line, sizeof line,
                  "committed held-out metrics cover %llu examples%s, the task's eval split %llu%s",
                  static_cast<unsigned long long>(c.examples), c.accuracy ? " with accuracy" : "",
                  static_cast<unsigned long long>(r.examples), r.accuracy ? " with accuracy" : "");
    fail(line);
    return;
  }
  if (!eval_agrees(c, r, exact)) {
    std::snprintf(line, sizeof line,
                  "committed held-out loss %.17g%s is not the replay's %.17g (%s)", c.loss,
                  c.accuracy ? (" / accuracy " + std::to_string(*c.accuracy)).c_str() : "", r.loss,
                  exact ? "exact mode" : "beyond the tolerance-mode bounds");
    fail(line);
    return;
  }
  check.eval_status = exact ? "verified" : "within_tolerance";
}

// The rest of what the record claims. Counts are the task's in every mode; in exact mode the
// replay is the epoch, so the trail and the loss must be its very bits.
template <typename Fail>
void judge_claims(EpochCheck& check, const CommitRecord& after, const Replay& replay,
                  const Task& task, Fail& fail) {
  const CommitMetrics& m = after.metrics;
  check.claimed_loss = m.loss;
  check.replay_loss = replay.loss;
  if (m.steps != replay.steps || m.samples != replay.samples) {
    fail("committed metrics claim " + std::to_string(m.steps) + " steps and " +
         std::to_string(m.samples) + " samples, the task's epoch has " +
         std::to_string(replay.steps) + " and " + std::to_string(replay.samples));
  }
  judge_eval(check, m, replay, compare_mode(task) == fp::CompareMode::kExact, fail);
  if (compare_mode(task) != fp::CompareMode::kExact) return;
  // The log stores a non-finite loss as null (read back as NaN): any non-finite loss matches it.
  const bool both_nonfinite = !std::isfinite(m.loss) && !std::isfinite(replay.loss);
  check.loss_verified = both_nonfinite || std::bit_cast<std::uint64_t>(m.loss) ==
                                              std::bit_cast<std::uint64_t>(replay.loss);
  if (!check.loss_verified) {
    char line[160];
    std::snprintf(line, sizeof line, "committed loss %.17g is not the replay's %.17g (exact mode)",
                  m.loss, replay.loss);
    fail(line);
  }
  if (after.trail.size() != replay.trail.size()) {
    fail("the committed trail has " + std::to_string(after.trail.size()) +
         " fingerprints, the task's epoch takes " + std::to_string(replay.trail.size()));
    return;
  }
  for (std::size_t i = 0; i < after.trail.size(); ++i) {
    auto committed = fp::fingerprint_from_json(after.trail[i]);
    auto replayed = fp::fingerprint_from_json(replay.trail[i]);
    if (!committed || !replayed || !(*committed == *replayed)) {
      fail("the committed trail fingerprint at step " +
           std::to_string(static_cast<std::int64_t>(i + 1) * task.fingerprint.trail_interval) +
           " is not the replay's (exact mode)");
      return;
    }
  }
  check.trail_verified = true;
}

// Fetches the committed "after" state (as a delta against `start` when given) and checks it like
// every fetched state (check_committed_state). Fetch failures the provider caused are failures.
Status fetch_after_state(EvidenceSource& source, const CheckContext& ctx, PreparedEpoch& p,
                         const Digest& before_root, std::optional<ByteSpan> start) {
  EpochCheck& check = p.check;
  const std::uint64_t fetched_before = source.bytes_fetched();
  std::optional<std::pair<Digest, ByteSpan>> base;
  if (start) base = std::make_pair(before_root, *start);
  auto fetched = source.snapshot(check.epoch, p.after.record.root, base);
  check.bytes_fetched += source.bytes_fetched() - fetched_before;
  if (!fetched) {
    if (!is_provider_fault(fetched.error())) return fetched.error();
    check.failures.push_back(epoch_text(check.epoch) +
                             ": the committed snapshot is unusable: " + fetched.error().message);
    return {};
  }
  check.after_fetched = true;
  for (const std::string& problem : check_committed_state(*fetched, p.after, ctx)) {
    check.failures.push_back(epoch_text(check.epoch) + ": the committed state: " + problem);
  }
  p.end = std::move(*fetched);
  return {};
}

}  // namespace

bool is_provider_fault(const Error& e) { return e.code != Errc::kIo; }

bool eval_agrees(const EvalClaim& claimed, const EvalClaim& replayed, bool exact) {
  if (claimed.accuracy.has_value() != replayed.accuracy.has_value()) return false;
  if (exact) {
    return same_bits(claimed.loss, replayed.loss) &&
           (!claimed.accuracy || same_bits(*claimed.accuracy, *replayed.accuracy));
  }
  return within(claimed.loss, replayed.loss,
                training::kEvalLossTolerance * std::max(1.0, std::fabs(replayed.loss))) &&
         (!claimed.accuracy ||
          within(*claimed.accuracy, *replayed.accuracy, training::kEvalAccuracyTolerance));
}

fp::CompareMode compare_mode(const Task& task) {
  return replays_bit_for_bit(task) ? fp::CompareMode::kExact : fp::CompareMode::kTolerance;
}

fp::Tolerance tolerance_of(const Task& task) {
  return {task.tolerance.atol, task.tolerance.rtol, task.tolerance.rel_l2,
          task.tolerance.max_outlier_fraction};
}

Result<PreparedEpoch> prepare_epoch(EvidenceSource& source, const CheckContext& ctx,
                                    const SignedRecord& before, const SignedRecord& after,
                                    bool after_needed_later, bool replayed_next) {
  const std::uint64_t e = after.record.epoch;
  PreparedEpoch p;
  p.before = before;
  p.after = after;
  EpochCheck& check = p.check;
  check.epoch = e;
  // What the record claims stands in the verdict whatever happens next: an epoch whose evidence
  // is unusable still shows the loss and held-out metrics the provider committed, as claimed.
  check.claimed_loss = after.record.metrics.loss;
  check.claimed_eval = after.record.metrics.eval;
  auto fail = [&](std::string what) {
    check.failures.push_back(epoch_text(e) + ": " + std::move(what));
  };
  const std::uint64_t fetched_before = source.bytes_fetched();

  auto start_bytes = source.snapshot(e - 1, before.record.root, std::nullopt);
  if (!start_bytes) {
    if (!is_provider_fault(start_bytes.error())) return start_bytes.error();
    fail("the snapshot committed for epoch " + std::to_string(e - 1) +
         " is unusable: " + start_bytes.error().message);
    return p;
  }
  for (const std::string& problem : check_committed_state(*start_bytes, before, ctx)) {
    fail("the state committed for epoch " + std::to_string(e - 1) + ": " + problem);
  }
  if (!check.failures.empty()) return p;

  // The committed fingerprint must sample the positions its own root dictates (Fiat-Shamir),
  // over the task's tensors with the task's k: a plan the provider chose could avoid what it
  // tampered with.
  auto committed = fp::fingerprint_from_json(after.record.fingerprint);
  if (!committed) {
    fail("committed fingerprint is malformed: " + committed.error().message);
    return p;
  }
  VT_ASSIGN_OR_RETURN(fp::SamplePlan expected, expected_commitment_plan(ctx, after.record));
  if (committed->plan.seed != expected.seed) {
    fail("committed fingerprint positions were not drawn from the committed root");
    return p;
  }
  if (committed->plan != expected) {
    fail("committed fingerprint samples other positions than the task derives (" +
         std::to_string(committed->plan.count()) + " positions over " +
         std::to_string(committed->plan.tensors.size()) + " tensors; the task's k is " +
         std::to_string(expected.count()) + " over " + std::to_string(expected.tensors.size()) +
         ")");
    return p;
  }

  check.bytes_fetched = source.bytes_fetched() - fetched_before;
  p.committed = std::move(*committed);
  const bool exact = compare_mode(*ctx.task) == fp::CompareMode::kExact;
  const bool wanted_now = ctx.fetch_after == FetchAfter::kAlways ||
                          (ctx.fetch_after == FetchAfter::kAuto && (after_needed_later || !exact));
  // A delta against the start needs both states in memory at once, beside the replayer's: for a
  // large state replayed here next, the state after is fetched once the replay let go of the
  // start, whole, to wait on disk (reuse_last_snapshot) until it is needed.
  p.after_deferred = wanted_now && replayed_next && exact && ctx.scratch != nullptr &&
                     start_bytes->size() >= ctx.large_state_bytes;
  if (wanted_now && !p.after_deferred) {
    VT_RETURN_IF_ERROR(
        fetch_after_state(source, ctx, p, before.record.root, ByteSpan(*start_bytes)));
    // Exact mode judges by the committed fingerprint, never by these bytes: what needs them
    // later asks `source` again, which keeps the last snapshot (reuse_last_snapshot).
    if (exact && ctx.scratch) p.end.reset();
  }
  p.start = std::move(*start_bytes);
  return p;
}

namespace {

// The trainer's state into `file`, a window at a time out of the live tensors; returns its root.
Result<Digest> stream_state(const training::Trainer& trainer, const std::filesystem::path& file) {
  VT_ASSIGN_OR_RETURN(std::unique_ptr<training::Trainer::CanonicalSource> source,
                      trainer.canonical_source());
  VT_ASSIGN_OR_RETURN(StreamFileWriter out,
                      StreamFileWriter::create(file.parent_path(), file.filename().string()));
  constexpr std::uint64_t kWindow = std::uint64_t{64} << 20;
  const std::uint64_t total = source->layout().total_size;
  fp::MerkleBuilder merkle;
  Bytes window;
  for (std::uint64_t at = 0; at < total; at += window.size()) {
    window.resize(std::min(kWindow, total - at));
    VT_RETURN_IF_ERROR(source->read(at, window));
    merkle.append(window);
    VT_RETURN_IF_ERROR(out.append(window));
  }
  // Read back by this process or its parent only while the verify runs.
  VT_RETURN_IF_ERROR(out.commit(file, StreamFileWriter::Durability::kScratch));
  return merkle.finish();
}

}  // namespace

Result<Replay> replay_here(const CheckContext& ctx, Bytes start,
                           const std::filesystem::path* state_file) {
  // From bytes only: nothing is shared with the provider's run.
  const auto t0 = std::chrono::steady_clock::now();
  Replay r;
  std::unique_ptr<training::Trainer> own;
  training::Trainer* trainer = ctx.replayer.get();
  if (trainer != nullptr) {
    VT_RETURN_IF_ERROR(load_committed(*trainer, start));
  } else {
    VT_ASSIGN_OR_RETURN(own, restore_committed(*ctx.task, start, ctx.trainer));
    trainer = own.get();
  }
  Bytes().swap(start);
  r.notes = trainer->replay_notes();
  // The trail as an honest provider takes it (provider/provider.cpp), to compare bit for bit:
  // exact mode only, the one mode where it is compared (each point is a device gather).
  const auto epoch = static_cast<std::uint64_t>(trainer->epoch() + 1);
  Status trail_status;
  training::EpochHooks hooks;
  if (ctx.task->fingerprint.trail_interval > 0 &&
      compare_mode(*ctx.task) == fp::CompareMode::kExact) {
    hooks.trail_every = ctx.task->fingerprint.trail_interval;
    hooks.on_trail = [&](std::int64_t step, const training::Trainer& t) {
      if (!trail_status) return;
      auto f = provider::live_fingerprint(
          t, fp::trail_seed(ctx.task_id, epoch, static_cast<std::uint64_t>(step)),
          static_cast<std::uint64_t>(ctx.task->fingerprint.tracking_k));
      if (f) {
        r.trail.push_back(fp::fingerprint_to_json(*f));
      } else {
        trail_status = f.error();
      }
    };
  }
  VT_ASSIGN_OR_RETURN(training::EpochSummary summary, trainer->train_epoch(hooks));
  VT_RETURN_IF_ERROR(std::move(trail_status));
  // The epoch's activations were freed, but glibc keeps freed heap for the next allocation; what
  // comes next is a state fetched or loaded beside the trainer, which would otherwise sit on top
  // of them (docs/verifier.md, "Memory").
  ::malloc_trim(0);
  if (state_file != nullptr) {
    VT_ASSIGN_OR_RETURN(r.root, stream_state(*trainer, *state_file));
  } else if (ctx.scratch) {
    const std::filesystem::path file =
        ctx.scratch->fresh_name("replayed-epoch-" + std::to_string(epoch), ".safetensors");
    VT_ASSIGN_OR_RETURN(r.root, stream_state(*trainer, file));
    VT_ASSIGN_OR_RETURN(r.state_file, StateFile::adopt(ctx.scratch, file, r.root));
  } else {
    VT_ASSIGN_OR_RETURN(r.snapshot, trainer->snapshot());
    r.root = fp::merkle_root(r.snapshot);
  }
  r.data_order_digest = summary.data_order_digest;
  r.loss = summary.mean_loss;
  if (summary.eval) r.eval = training::eval_claim(*summary.eval);
  r.steps = static_cast<std::uint64_t>(summary.steps);
  r.samples = static_cast<std::uint64_t>(summary.samples);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

Result<fp::Fingerprint> gather_replayed(const Replay& replay, const fp::SamplePlan& plan) {
  if (replay.state_file) return replay.state_file->gather(plan);
  VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(replay.snapshot));
  return fp::gather(plan, view);
}

Result<Bytes> replayed_bytes(const Replay& replay) {
  if (replay.state_file) return replay.state_file->read_all();
  return replay.snapshot;
}

Status fetch_after_if_replay_missed(EvidenceSource& source, const CheckContext& ctx,
                                    PreparedEpoch& prepared, const Replay& replay) {
  if (prepared.end || prepared.check.after_fetched || ctx.fetch_after == FetchAfter::kNever)
    return {};
  if (!prepared.committed || replay.root == prepared.after.record.root) return {};
  // No delta base: the start state may be gone (a child process replayed it), and this is the
  // rare path of a provider caught out.
  return fetch_after_state(source, ctx, prepared, Digest{}, std::nullopt);
}

Result<EpochCheck> judge_epoch(PreparedEpoch prepared, const Replay& replay,
                               const CheckContext& ctx) {
  EpochCheck check = std::move(prepared.check);
  const SignedRecord& after = prepared.after;
  const std::uint64_t e = check.epoch;
  auto fail = [&](std::string what) {
    check.failures.push_back(epoch_text(e) + ": " + std::move(what));
  };
  if (!prepared.committed)
    return internal_error(epoch_text(e) + ": judged without a committed fingerprint");
  const fp::Fingerprint& committed = *prepared.committed;
  const std::optional<Bytes>& end_bytes = prepared.end;
  check.replayed = true;
  check.replay_notes = replay.notes;
  check.replay_seconds = replay.seconds;
  check.replay_root = replay.root;
  check.replay_root_matches = check.replay_root == after.record.root;

  if (replay.data_order_digest != after.record.data_order_digest) {
    fail("the committed data order differs from the task's (data_order_digest " +
         hex_encode(after.record.data_order_digest).substr(0, 16) + "..., replay " +
         hex_encode(replay.data_order_digest).substr(0, 16) + "...)");
  }
  // Exact mode reads only the committed positions of the replayed state, not the state.
  VT_ASSIGN_OR_RETURN(fp::Fingerprint replay_fp, gather_replayed(replay, committed.plan));
  const fp::CompareMode mode = compare_mode(*ctx.task);
  VT_ASSIGN_OR_RETURN(check.fingerprint,
                      fp::compare(replay_fp, committed, mode, tolerance_of(*ctx.task)));
  if (!check.fingerprint->match) {
    std::string where;
    if (check.fingerprint->first_mismatch) {
      where = " (first at " + check.fingerprint->first_mismatch->tensor + "[" +
              std::to_string(check.fingerprint->first_mismatch->index) + "])";
    }
    fail("replay does not reach the committed fingerprint: " +
         std::to_string(check.fingerprint->mismatches) + " of " +
         std::to_string(check.fingerprint->compared) + " values differ, rel L2 " +
         std::to_string(check.fingerprint->rel_l2) + where);
  }
  if (mode == fp::CompareMode::kExact && !check.replay_root_matches) {
    fail("replay is not bit-identical: its root " + hex_encode(check.replay_root).substr(0, 16) +
         "... differs from the committed " + hex_encode(after.record.root).substr(0, 16) + "...");
  }
  judge_claims(check, after.record, replay, *ctx.task, fail);
  if (end_bytes && mode == fp::CompareMode::kTolerance) {
    auto end_view = parse_safetensors(*end_bytes);
    if (end_view.ok()) {
      VT_ASSIGN_OR_RETURN(const Bytes replayed, replayed_bytes(replay));
      VT_ASSIGN_OR_RETURN(SafetensorsView replay_view, parse_safetensors(replayed));
      const fp::SamplePlan all = full_plan(replay_view);
      VT_ASSIGN_OR_RETURN(fp::Fingerprint replay_all, fp::gather(all, replay_view));
      auto committed_all = fp::gather(all, *end_view);
      if (!committed_all) {
        fail("the committed snapshot's tensors differ from the task's model: " +
             committed_all.error().message);
      } else {
        VT_ASSIGN_OR_RETURN(check.full_state,
                            fp::compare(replay_all, *committed_all, mode, tolerance_of(*ctx.task)));
        if (!check.full_state->match) {
          fail("replay differs from the committed snapshot beyond tolerance: rel L2 " +
               std::to_string(check.full_state->rel_l2) + ", " +
               std::to_string(check.full_state->mismatches) + " values outside atol/rtol");
        }
      }
    }
  }
  check.passed = check.failures.empty();
  return check;
}

Result<EpochCheck> check_epoch(EvidenceSource& source, const CheckContext& ctx,
                               const SignedRecord& before, const SignedRecord& after,
                               bool after_needed_later) {
  VT_ASSIGN_OR_RETURN(
      PreparedEpoch prepared,
      prepare_epoch(source, ctx, before, after, after_needed_later, /*replayed_next=*/true));
  if (!prepared.replayable()) return std::move(prepared.check);
  // The start state goes into the replay: a second replay after a failure fetches it again.
  auto replay = replay_here(ctx, std::move(prepared.start));
  if (!replay) return unreplayable(std::move(prepared), replay.error());
  if (prepared.after_deferred) {
    // Whole: the start it would be a delta against is gone.
    VT_RETURN_IF_ERROR(fetch_after_state(source, ctx, prepared, Digest{}, std::nullopt));
    prepared.end.reset();  // exact mode: the cache keeps it for the next epoch or the final model
  }
  VT_RETURN_IF_ERROR(fetch_after_if_replay_missed(source, ctx, prepared, *replay));
  return judge_with_second_replay(std::move(prepared), *replay, source, ctx);
}

Result<std::unique_ptr<training::Trainer>> restore_committed(
    const Task& task, ByteSpan state, const training::TrainerOptions& options) {
  auto restored = training::Trainer::restore(task, state, options);
  // Refused settings (a thread count or device this verifier was told to use) come back as
  // input errors and stay the verifier's; only a state whose bytes LibTorch cannot load is
  // the provider's.
  if (restored || restored.error().code != Errc::kInternal) return restored;
  if (auto fresh = training::Trainer::create(task, options); !fresh) return restored.error();
  return rejected("the committed state cannot be restored: " + restored.error().message);
}

Status load_committed(training::Trainer& trainer, ByteSpan state) {
  Status loaded = trainer.load(state);
  if (loaded || loaded.error().code != Errc::kInternal) return loaded;
  return rejected("the committed state cannot be restored: " + loaded.error().message);
}

Result<EpochCheck> unreplayable(PreparedEpoch prepared, const Error& replay_error) {
  if (replay_error.code != Errc::kRejected) return replay_error;
  prepared.check.failures.push_back(epoch_text(prepared.check.epoch) + ": " + replay_error.message);
  return std::move(prepared.check);
}

}  // namespace vt::verifier

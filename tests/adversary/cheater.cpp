// The cheating provider: synchronous, one epoch at a time, the honest provider's commitments
// (provider/provider.cpp) computed from whatever bytes it decides to commit.

#include "tests/adversary/cheater.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "common/safetensors.h"
#include "fingerprint/fingerprint.h"
#include "fingerprint/merkle.h"
#include "protocol/log.h"
#include "provider/workdir/store.h"
#include "provider/workdir/workdir.h"
#include "training/data/data.h"
#include "training/environment.h"
#include "training/eval_claim.h"
#include "training/live_fingerprint.h"

namespace vt::adversary {
namespace {

using training::Trainer;
using training::TrainerOptions;

struct Trained {
  Bytes bytes;
  std::vector<nlohmann::json> trail;
  double loss = 0.0;
  std::optional<EvalClaim> eval;
};

// One epoch from `start` with `run_task` (the task itself or a modified one). The trail is taken
// as the honest provider takes it, at the real task's seeds, so it looks right.
Result<Trained> train_from(const Task& run_task, ByteSpan start, const Task& task, const Digest& id,
                           std::uint64_t epoch, const TrainerOptions& options) {
  VT_ASSIGN_OR_RETURN(auto trainer, Trainer::restore(run_task, start, options));
  Trained out;
  Status trail_status;
  training::EpochHooks hooks;
  if (task.fingerprint.trail_interval > 0) {
    hooks.trail_every = task.fingerprint.trail_interval;
    hooks.on_trail = [&](std::int64_t step, const Trainer& t) {
      auto f =
          provider::live_fingerprint(t, fp::trail_seed(id, epoch, static_cast<std::uint64_t>(step)),
                                     static_cast<std::uint64_t>(task.fingerprint.tracking_k));
      if (!f) {
        trail_status = f.error();
        return;
      }
      out.trail.push_back(fp::fingerprint_to_json(*f));
    };
  }
  VT_ASSIGN_OR_RETURN(training::EpochSummary s, trainer->train_epoch(hooks));
  VT_RETURN_IF_ERROR(std::move(trail_status));
  VT_ASSIGN_OR_RETURN(out.bytes, trainer->snapshot());
  out.loss = s.mean_loss;
  if (s.eval)
    out.eval = training::eval_claim(*s.eval);  // the held-out metrics of what it committed
  return out;
}

// A cheater that did not train still commits a trail of the right length, read off the bytes
// it commits.
Result<std::vector<nlohmann::json>> trail_of_bytes(ByteSpan bytes, const Task& task,
                                                   const Digest& id, std::uint64_t epoch,
                                                   std::int64_t steps) {
  std::vector<nlohmann::json> trail;
  if (task.fingerprint.trail_interval <= 0) return trail;
  VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(bytes));
  for (std::int64_t s = task.fingerprint.trail_interval; s <= steps;
       s += task.fingerprint.trail_interval) {
    VT_ASSIGN_OR_RETURN(
        fp::Fingerprint f,
        fp::fingerprint_snapshot(view, fp::trail_seed(id, epoch, static_cast<std::uint64_t>(s)),
                                 static_cast<std::uint64_t>(task.fingerprint.tracking_k)));
    trail.push_back(fp::fingerprint_to_json(f));
  }
  return trail;
}

Result<std::string> meta_of(ByteSpan bytes, const std::string& key) {
  VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(bytes));
  auto it = view.metadata.find(key);
  if (it == view.metadata.end()) return invalid_input("snapshot lacks metadata " + key);
  return it->second;
}

// Trains one epoch under `modified` (another task_id) and makes the result look like `task`'s.
Result<Trained> train_as(const Task& modified, ByteSpan start, const Task& task, const Digest& id,
                         std::uint64_t epoch, const TrainerOptions& options,
                         const std::map<std::string, std::string>& after_meta) {
  VT_ASSIGN_OR_RETURN(Bytes disguised,
                      rewrite_metadata(start, {{"task_id", hex_encode(task_id(modified))},
                                               {"precision", name_string(modified.precision)}}));
  VT_ASSIGN_OR_RETURN(Trained t, train_from(modified, disguised, task, id, epoch, options));
  auto meta = after_meta;
  meta["task_id"] = hex_encode(id);
  meta["precision"] = name_string(task.precision);
  VT_ASSIGN_OR_RETURN(t.bytes, rewrite_metadata(t.bytes, meta));
  return t;
}

class Cheater {
 public:
  Cheater(const Task& task, const CheatPlan& plan, const TrainerOptions& options)
      : task_(task), id_(task_id(task)), plan_(plan), options_(options) {}

  Status init() {
    // A trainer, not load_dataset: memory-mapped datasets (tensors) are never loaded whole.
    VT_ASSIGN_OR_RETURN(auto trainer, Trainer::create(task_, options_));
    dataset_size_ = trainer->dataset_size();
    steps_ = trainer->steps_per_epoch();
    return {};
  }

  std::int64_t steps() const { return steps_; }

  // What an honest epoch `epoch` is said to have read: the provider can always compute it.
  Digest honest_order(std::uint64_t epoch) const {
    return training::order_digest(*training::epoch_order(
        task_.seed, static_cast<std::int64_t>(epoch), dataset_size_, steps_, task_.batch_size));
  }

  Result<Bytes> initial(Strategy s) const {
    if (s != Strategy::kForgedStart) {
      VT_ASSIGN_OR_RETURN(auto t, Trainer::create(task_, options_));
      return t->snapshot();
    }
    Task other = task_;
    other.seed += 1;  // e.g. a pretrained or otherwise chosen start
    VT_ASSIGN_OR_RETURN(auto t, Trainer::create(other, options_));
    VT_ASSIGN_OR_RETURN(Bytes b, t->snapshot());
    return rewrite_metadata(b, {{"task_id", hex_encode(id_)}});
  }

  // Epoch `e` from the committed history (history[e-1] is the state committed for e-1).
  Result<Trained> epoch(std::uint64_t e, Strategy s, const std::vector<Bytes>& history) const {
    const Bytes& prev = history[e - 1];
    VT_ASSIGN_OR_RETURN(std::string g, meta_of(prev, "global_step"));
    const std::string es = std::to_string(e);
    const std::string advanced = std::to_string(std::stoll(g) + steps_);
    const std::map<std::string, std::string> looks_done = {
        {"epoch", es}, {"data_cursor", es}, {"global_step", advanced}};
    Task modified = task_;
    switch (s) {
      case Strategy::kHonest:
      case Strategy::kForgedStart:
        return train_from(task_, prev, task_, id_, e, options_);
      case Strategy::kSkipEpoch: {
        Trained t;
        VT_ASSIGN_OR_RETURN(t.bytes, rewrite_metadata(prev, looks_done));
        VT_ASSIGN_OR_RETURN(t.trail, trail_of_bytes(t.bytes, task_, id_, e, steps_));
        return t;
      }
      case Strategy::kFewerSteps:
      case Strategy::kDropBatch:
        if (steps_ < 2)
          return invalid_input("cheat: the task has one step per epoch; none can be dropped");
        modified.steps_per_epoch =
            s == Strategy::kDropBatch ? steps_ - 1 : std::max<std::int64_t>(1, steps_ / 3);
        return train_as(modified, prev, task_, id_, e, options_, looks_done);
      case Strategy::kLearningRate:
        modified.optimizer.lr *= 2;
        return train_as(modified, prev, task_, id_, e, options_, {});
      case Strategy::kSkipClipping:
        modified.optimizer.clip_grad_norm = 0.0;
        modified.optimizer.clip_norm = "l2";
        return train_as(modified, prev, task_, id_, e, options_, {});
      case Strategy::kDecayEverything:
        modified.optimizer.no_decay.clear();
        return train_as(modified, prev, task_, id_, e, options_, {});
      case Strategy::kSkipSmoothing:
        modified.loss_options.label_smoothing = 0.0;
        return train_as(modified, prev, task_, id_, e, options_, {});
      case Strategy::kSkipAugmentation:
        modified.dataset.augment = {};
        return train_as(modified, prev, task_, id_, e, options_, {});
      case Strategy::kFrozenAverage:
        // The largest decay a task may hold: in binary32, a ⊗ 1 ⊕ x ⊗ 1.1e−16, the average as
        // it was (a task cannot say 1).
        modified.optimizer.ema_decay = std::nextafter(1.0, 0.0);
        return train_as(modified, prev, task_, id_, e, options_, {});
      case Strategy::kLowPrecision:
        // Portable arithmetic is float32 throughout; its cheap way out is another arithmetic,
        // LibTorch's own (vendor) kernels, rather than a narrower type.
        if (task_.determinism == Determinism::kPortable) {
          modified.determinism = Determinism::kExact;
        } else {
          modified.precision = Precision::kBf16;
        }
        return train_as(modified, prev, task_, id_, e, options_, {});
      case Strategy::kDataOrder: {
        // The trainer draws epoch e's order from the snapshot's epoch + 1: shift it by one.
        VT_ASSIGN_OR_RETURN(Bytes shifted,
                            rewrite_metadata(prev, {{"epoch", es}, {"data_cursor", es}}));
        VT_ASSIGN_OR_RETURN(Trained t, train_from(task_, shifted, task_, id_, e, options_));
        VT_ASSIGN_OR_RETURN(t.bytes,
                            rewrite_metadata(t.bytes, {{"epoch", es}, {"data_cursor", es}}));
        return t;
      }
      case Strategy::kNoise: {
        VT_ASSIGN_OR_RETURN(Trained t, train_from(task_, prev, task_, id_, e, options_));
        VT_ASSIGN_OR_RETURN(t.bytes,
                            add_noise(t.bytes, plan_.noise, plan_.noise_seed * 1000003 + e));
        return t;
      }
      case Strategy::kForge: {
        VT_ASSIGN_OR_RETURN(Trained honest, train_from(task_, prev, task_, id_, e, options_));
        VT_ASSIGN_OR_RETURN(Bytes cheap, rewrite_metadata(prev, looks_done));
        VT_ASSIGN_OR_RETURN(Forgery f,
                            forge_snapshot(cheap, honest.bytes, id_, e,
                                           static_cast<std::uint64_t>(task_.fingerprint.k)));
        honest.bytes = std::move(f.bytes);
        return honest;
      }
      case Strategy::kBreakChain: {
        if (e < 2) return invalid_input("cheat: break_chain needs epoch >= 2");
        const std::string ps = std::to_string(e - 1);
        VT_ASSIGN_OR_RETURN(Bytes stale, rewrite_metadata(history[e - 2], {{"epoch", ps},
                                                                           {"data_cursor", ps},
                                                                           {"global_step", g}}));
        return train_from(task_, stale, task_, id_, e, options_);
      }
      case Strategy::kReplayOld: {
        if (e < 2) return invalid_input("cheat: replay_old needs epoch >= 2");
        Trained t;
        VT_ASSIGN_OR_RETURN(t.bytes, rewrite_metadata(history[e - 2], looks_done));
        VT_ASSIGN_OR_RETURN(t.trail, trail_of_bytes(t.bytes, task_, id_, e, steps_));
        return t;
      }
    }
    return internal_error("cheat: unknown strategy");
  }

 private:
  const Task& task_;
  Digest id_;
  const CheatPlan& plan_;
  TrainerOptions options_;
  std::int64_t dataset_size_ = 0;
  std::int64_t steps_ = 0;
};

}  // namespace

const std::vector<Strategy>& epoch_strategies() {
  static const std::vector<Strategy> all = {
      Strategy::kSkipEpoch,    Strategy::kFewerSteps, Strategy::kLearningRate, Strategy::kDataOrder,
      Strategy::kNoise,        Strategy::kForge,      Strategy::kBreakChain,   Strategy::kReplayOld,
      Strategy::kLowPrecision, Strategy::kDropBatch};
  return all;
}

const std::vector<Strategy>& recipe_strategies() {
  static const std::vector<Strategy> all = {Strategy::kSkipClipping, Strategy::kDecayEverything,
                                            Strategy::kSkipSmoothing, Strategy::kFrozenAverage};
  return all;
}

std::string strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kHonest:
      return "honest";
    case Strategy::kSkipEpoch:
      return "skip_epoch";
    case Strategy::kFewerSteps:
      return "fewer_steps";
    case Strategy::kLearningRate:
      return "learning_rate";
    case Strategy::kDataOrder:
      return "data_order";
    case Strategy::kNoise:
      return "noise";
    case Strategy::kForge:
      return "forge";
    case Strategy::kBreakChain:
      return "break_chain";
    case Strategy::kReplayOld:
      return "replay_old";
    case Strategy::kLowPrecision:
      return "low_precision";
    case Strategy::kDropBatch:
      return "drop_batch";
    case Strategy::kForgedStart:
      return "forged_start";
    case Strategy::kSkipClipping:
      return "skip_clipping";
    case Strategy::kDecayEverything:
      return "decay_everything";
    case Strategy::kSkipSmoothing:
      return "skip_smoothing";
    case Strategy::kSkipAugmentation:
      return "skip_augmentation";
    case Strategy::kFrozenAverage:
      return "frozen_average";
  }
  return "?";
}

Result<CheatRun> write_workdir(const Task& task, const std::filesystem::path& dir,
                               const CheatPlan& plan, const SigningKey& key,
                               const training::TrainerOptions& options) {
  VT_ASSIGN_OR_RETURN(provider::Workdir workdir, provider::Workdir::open_for(dir, task));
  const Digest id = workdir.task_id();
  VT_ASSIGN_OR_RETURN(CommitLog log,
                      CommitLog::open(workdir.log_file(), id, LogMode::kAppend, key.public_key()));
  provider::SnapshotStore store(workdir.snapshots_dir(), {4, 1, 64});
  Cheater cheater(task, plan, options);
  VT_RETURN_IF_ERROR(cheater.init());

  CheatRun run;
  run.workdir = dir;
  std::vector<Bytes> history;
  auto strategy_at = [&](std::uint64_t e) {
    auto it = plan.cheats.find(e);
    return it == plan.cheats.end() ? Strategy::kHonest : it->second;
  };
  auto commit = [&](std::uint64_t e, Bytes bytes, std::vector<nlohmann::json> trail, double loss,
                    std::optional<EvalClaim> eval) -> Status {
    const Digest root = fp::merkle_root(bytes);
    VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(bytes));
    VT_ASSIGN_OR_RETURN(fp::Fingerprint f,
                        fp::fingerprint_snapshot(view, fp::commitment_seed(id, e, root),
                                                 static_cast<std::uint64_t>(task.fingerprint.k)));
    VT_ASSIGN_OR_RETURN(
        fp::Fingerprint tracking,
        fp::fingerprint_snapshot(view, fp::tracking_seed(id),
                                 static_cast<std::uint64_t>(task.fingerprint.tracking_k)));
    std::optional<std::pair<Digest, ByteSpan>> base;
    if (!history.empty()) base = std::make_pair(run.roots.back(), ByteSpan(history.back()));
    VT_RETURN_IF_ERROR(store.put(e, root, bytes, base));
    CommitRecord record;
    record.task_id = id;
    record.epoch = e;
    record.root = root;
    record.fingerprint = fp::fingerprint_to_json(f);
    record.tracking_fingerprint = fp::fingerprint_to_json(tracking);
    record.trail = std::move(trail);
    // A cheat gains nothing by hiding where it ran: it commits its environment as the
    // provider does (docs/environment.md).
    if (e == 0) record.environment = training::measure_environment(task, options);
    if (e > 0) {
      record.data_order_digest = cheater.honest_order(e);
      const auto steps = static_cast<std::uint64_t>(cheater.steps());
      record.metrics = {loss, steps, 0.0, steps * static_cast<std::uint64_t>(task.batch_size),
                        eval};
    }
    VT_RETURN_IF_ERROR(log.append(std::move(record), key));
    run.roots.push_back(root);
    history.push_back(std::move(bytes));
    return {};
  };

  VT_ASSIGN_OR_RETURN(Bytes start, cheater.initial(strategy_at(0)));
  VT_RETURN_IF_ERROR(commit(0, std::move(start), {}, 0.0, std::nullopt));
  for (std::uint64_t e = 1; e <= static_cast<std::uint64_t>(task.epochs); ++e) {
    auto t = cheater.epoch(e, strategy_at(e), history);
    if (!t)
      return t.error().context("epoch " + std::to_string(e) + " (" + strategy_name(strategy_at(e)) +
                               ")");
    VT_RETURN_IF_ERROR(commit(e, std::move(t->bytes), std::move(t->trail), t->loss, t->eval));
  }
  return run;
}

}  // namespace vt::adversary

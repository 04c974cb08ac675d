#include "verifier/check/second_replay.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <span>

#include "common/process.h"
#include "common/safetensors.h"
#include "verifier/check/replay_jobs.h"

namespace vt::verifier {
namespace {

// Non-finite losses are one value: the log keeps them as null (epoch_check.cpp).
bool same_loss_bits(double a, double b) {
  return (!std::isfinite(a) && !std::isfinite(b)) ||
         std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

// A replayed state read a window at a time, wherever it is (Replay::snapshot or its file), so
// that comparing two of them never holds either whole.
class ReplayedState {
 public:
  static Result<ReplayedState> of(const Replay& r) {
    ReplayedState s;
    s.replay_ = &r;
    if (r.state_file) {
      s.tensors_ = r.state_file->tensors();
      s.data_start_ = r.state_file->data_start();
      return s;
    }
    VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(r.snapshot));
    s.tensors_ = std::move(view.tensors);
    s.data_start_ = view.data_start;
    return s;
  }
  const TensorEntry* find(const std::string& name) const {
    for (const TensorEntry& t : tensors_)
      if (t.name == name) return &t;
    return nullptr;
  }
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  Status read(const TensorEntry& t, std::uint64_t at, std::span<std::uint8_t> out) const {
    const std::uint64_t offset = data_start_ + t.begin + at;
    if (replay_->state_file) return replay_->state_file->read(offset, out);
    std::memcpy(out.data(), replay_->snapshot.data() + offset, out.size());
    return {};
  }

 private:
  const Replay* replay_ = nullptr;
  std::vector<TensorEntry> tensors_;
  std::uint64_t data_start_ = 0;
};

// The first tensor, in the snapshot's canonical order, whose bytes differ between two states of
// one layout, with how many of its values differ.
std::string first_differing_tensor(const Replay& first, const Replay& second) {
  auto a = ReplayedState::of(first);
  auto b = ReplayedState::of(second);
  if (!a || !b) return "an unreadable state";
  constexpr std::uint64_t kWindow = std::uint64_t{16} << 20;
  Bytes x, y;
  for (const TensorEntry& t : a->tensors()) {
    const TensorEntry* u = b->find(t.name);
    if (u == nullptr || u->shape != t.shape || u->dtype != t.dtype)
      return "tensor " + t.name + " (its shape or type)";
    const std::size_t width = dtype_size(t.dtype);
    const std::uint64_t window = kWindow / width * width;
    std::uint64_t differing = 0;
    for (std::uint64_t at = 0; at < t.nbytes(); at += window) {
      const std::uint64_t n = std::min(window, t.nbytes() - at);
      x.resize(n);
      y.resize(n);
      if (!a->read(t, at, x) || !b->read(*u, at, y)) return "an unreadable state";
      if (std::memcmp(x.data(), y.data(), n) == 0) continue;
      for (std::size_t i = 0; i + width <= n; i += width)
        differing += std::memcmp(x.data() + i, y.data() + i, width) != 0 ? 1 : 0;
    }
    if (differing == 0) continue;
    return "tensor " + t.name + " (" + std::to_string(differing) + " of " +
           std::to_string(t.numel()) + " values)";
  }
  return "the snapshot's metadata";
}

}  // namespace

Result<Replay> replay_again(const CheckContext& ctx, std::uint64_t epoch, ByteSpan start) {
  if (ctx.second_replay_program.empty()) return replay_here(ctx, Bytes(start.begin(), start.end()));
  VT_ASSIGN_OR_RETURN(auto worker,
                      ReplayJobs::create(ctx.second_replay_program, 1, *ctx.task, ctx.trainer,
                                         ctx.scratch, scrambled_memory_environment()));
  VT_RETURN_IF_ERROR(worker->start(epoch, start));
  return worker->finish_oldest();
}

std::string state_difference(const Replay& first, const Replay& second) {
  if (first.root != second.root) return first_differing_tensor(first, second);
  if (!same_loss_bits(first.loss, second.loss)) return "the epoch's mean loss";
  return "";
}

std::string replay_difference(const Replay& first, const Replay& second) {
  if (std::string d = state_difference(first, second); !d.empty()) return d;
  if (first.trail != second.trail) return "the trail fingerprints";
  if (first.eval.has_value() != second.eval.has_value() ||
      (first.eval && !eval_agrees(*first.eval, *second.eval, /*exact=*/true)))
    return "the held-out metrics";
  if (first.data_order_digest != second.data_order_digest) return "the data order";
  if (first.steps != second.steps || first.samples != second.samples) return "the step counts";
  return "";
}

Result<EpochCheck> judge_with_second_replay(PreparedEpoch prepared, const Replay& first,
                                            EvidenceSource& source, const CheckContext& ctx) {
  const std::vector<std::string> evidence_failures = prepared.check.failures;
  const std::uint64_t e = prepared.check.epoch;
  const Digest before_root = prepared.before.record.root;
  Bytes start = std::move(prepared.start);
  VT_ASSIGN_OR_RETURN(EpochCheck check, judge_epoch(std::move(prepared), first, ctx));
  const bool missed_on_replay = check.failures.size() > evidence_failures.size();
  if (check.passed || !missed_on_replay || compare_mode(*ctx.task) != fp::CompareMode::kExact)
    return check;
  if (start.empty()) {
    // The state crossed the network (or the disk) a moment ago and passed its checks; what
    // fails now, the provider fails.
    auto fetched = source.snapshot(e - 1, before_root, std::nullopt);
    if (!fetched) {
      if (!is_provider_fault(fetched.error())) return fetched.error();
      check.failures.push_back("epoch " + std::to_string(e) +
                               ": the snapshot committed for epoch " + std::to_string(e - 1) +
                               " is unusable on a second fetch: " + fetched.error().message);
      return check;
    }
    start = std::move(*fetched);
  }
  VT_ASSIGN_OR_RETURN(Replay second, replay_again(ctx, e, start));
  check.second_replay_root = second.root;
  check.second_replay_seconds = second.seconds;
  const std::string differs = replay_difference(first, second);
  if (differs.empty()) {
    check.replay_notes.push_back(
        "a second replay in a fresh process, its memory scrambled, reproduced the first bit for "
        "bit (root " +
        hex_encode(second.root).substr(0, 16) +
        "...): what differs from the commitment is the provider's");
    return check;
  }
  check.failures = evidence_failures;
  check.passed = false;
  check.irreproducible = irreproducible_text(e, differs);
  return check;
}

std::string irreproducible_text(std::uint64_t epoch, const std::string& difference) {
  return "two replays of epoch " + std::to_string(epoch) +
         " on this machine differ from each other (" + difference +
         "): the task's arithmetic does not reproduce here (a nondeterministic operator, or one "
         "that reads memory it never wrote), so neither replay is evidence against the provider";
}

}  // namespace vt::verifier

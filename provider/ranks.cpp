#include "provider/ranks.h"

#include <cstdlib>
#include <string>

#include "common/sha256.h"
#include "provider/crash_point.h"

namespace vt::provider {
namespace {

std::string after_epoch(std::uint64_t epoch) {
  return "the state after epoch " + std::to_string(epoch);
}

}  // namespace

Digest state_digest(int rank, std::uint64_t epoch, ByteSpan state) {
  const char* fault = std::getenv("VT_TEST_FAULTY_RANK");
  if (fault && std::string(fault) == std::to_string(rank) + ":" + std::to_string(epoch) &&
      !state.empty()) {
    Bytes copy(state.begin(), state.end());
    copy.back() ^= 1;
    return sha256(copy);
  }
  return sha256(state);
}

void attach_rank0(ProviderOptions& options,
                  const std::shared_ptr<training::Collective>& collective) {
  options.collective = collective;
  options.on_start = [collective](const training::Trainer& trainer) -> Status {
    VT_ASSIGN_OR_RETURN(Bytes state, trainer.snapshot());
    return collective->broadcast(state);
  };
  options.on_state = [collective](std::uint64_t epoch, ByteSpan state) -> Status {
    return collective->agree(after_epoch(epoch), state_digest(collective->rank(), epoch, state));
  };
}

Status run_follower(const Task& task, const FollowerOptions& options) {
  training::Collective& collective = *options.collective;
  Bytes state;
  VT_RETURN_IF_ERROR(collective.broadcast(state));
  training::TrainerOptions topts;
  topts.task_dir = options.task_dir;
  topts.device = options.device;
  topts.checkpoint_activations = options.checkpoint_activations;
  topts.collective = options.collective;
  auto trainer = training::Trainer::restore(task, state, topts);
  if (!trainer)
    return trainer.error().context("rank " + std::to_string(collective.rank()) +
                                   ": rank 0's state");
  for (std::int64_t e = (*trainer)->epoch() + 1; e <= task.epochs; ++e) {
    const auto epoch = static_cast<std::uint64_t>(e);
    crash_point("during_training", epoch);
    if (auto trained = (*trainer)->train_epoch(); !trained) return trained.error();
    VT_RETURN_IF_ERROR((*trainer)->snapshot_into(state));
    VT_RETURN_IF_ERROR(
        collective.agree(after_epoch(epoch), state_digest(collective.rank(), epoch, state)));
  }
  return collective.finish();
}

}  // namespace vt::provider

#pragma once
// Data-parallel training over several ranks (docs/training.md, "Gradient groups"). Rank 0 is
// the provider: it trains its share of every step, commits, stores and serves. Every other
// rank is a follower: it starts from rank 0's state, trains its share, and keeps nothing. After
// every epoch all ranks compare a digest of their whole state, and stop if any differs.

#include <memory>

#include "provider/provider.h"
#include "training/distributed.h"

namespace vt::provider {

// Sets options.collective, on_start (rank 0's state to every rank) and on_state (the
// per-epoch comparison) for rank 0.
void attach_rank0(ProviderOptions& options,
                  const std::shared_ptr<training::Collective>& collective);

struct FollowerOptions {
  std::filesystem::path task_dir = ".";
  std::string device;
  bool checkpoint_activations = false;  // training::TrainerOptions's
  std::shared_ptr<training::Collective> collective;
};

// A rank other than 0, until the task's last epoch; then waits for nothing but rank 0's store.
Status run_follower(const Task& task, const FollowerOptions& options);

// Test-only fault injection: with VT_TEST_FAULTY_RANK=<rank>:<epoch> in the environment, that
// rank's digest of that epoch's state is taken over a copy with one bit flipped, as if it had
// computed a different state. Unset, the digest is the SHA-256 of the state bytes.
Digest state_digest(int rank, std::uint64_t epoch, ByteSpan state);

}  // namespace vt::provider

#pragma once
// Ranks of one data-parallel run, joined through torch.distributed's c10d: a TCPStore for the
// rendezvous and small agreements, ProcessGroupGloo for tensors (docs/training.md,
// "Gradient groups"). Torch-free header: the process group stays behind the pimpl.
//
// The gradient exchange itself is internal to training/ (internal/tree_reduce.h); what callers
// outside need is here: joining, agreeing on a digest, and handing rank 0's bytes to all.

#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "common/bytes.h"
#include "common/result.h"

namespace vt::training {

struct DistributedOptions {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // How long any one exchange may wait for a peer before the run stops: a rank that died
  // leaves the others blocked in a receive, and this bounds that wait.
  std::chrono::milliseconds timeout{60000};
};

// Reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torchrun's names) into `options`
// where set; a malformed value is an error naming the variable.
Status read_distributed_env(DistributedOptions& options);

class Collective {
 public:
  // Joins the run: rank 0 hosts the TCPStore at master_addr:master_port, the others connect to
  // it; returns when all world_size ranks are in or the timeout passes.
  static Result<std::shared_ptr<Collective>> connect(const DistributedOptions& options);
  ~Collective();
  Collective(const Collective&) = delete;
  Collective& operator=(const Collective&) = delete;

  int rank() const;
  int world_size() const;
  std::chrono::milliseconds timeout() const;

  // Every rank publishes `mine` under `what` and reads everyone else's; an error naming the
  // ranks that differ when they are not all equal (every rank reaches the same verdict).
  Status agree(const std::string& what, const Digest& mine);
  // The most bytes a follower accepts from broadcast(): what a snapshot may hold elsewhere
  // (verifier::SourceLimits, provider's Store). The size is read from the store before the
  // follower allocates, and the store is reachable by anyone who can reach master_port.
  static constexpr std::uint64_t kMaxBroadcastBytes = std::uint64_t{64} << 30;

  // Rank 0's `bytes` replace every other rank's; a follower refuses a size above `limit`.
  Status broadcast(Bytes& bytes, std::uint64_t limit = kMaxBroadcastBytes);
  // Called once at the end: rank 0, which hosts the store, waits until every other rank has
  // read what it needed from it before it may exit.
  Status finish();

  // Host floats summed over every rank in place: along the group tree (what training uses),
  // or by c10d's own Gloo allreduce (whose order depends on W: the benchmark's baseline).
  Status tree_allreduce(std::span<float> values);
  Status gloo_allreduce(std::span<float> values);

  struct Impl;  // distributed.cpp
  Impl& impl() { return *impl_; }

 private:
  explicit Collective(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vt::training

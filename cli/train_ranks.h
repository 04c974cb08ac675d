#pragma once
// `train` on several ranks (docs/cli.md, "train"): --nproc starts local ranks like torchrun
// --nproc-per-node; --rank/--world-size/--master-addr/--master-port, or torchrun's RANK,
// WORLD_SIZE, MASTER_ADDR and MASTER_PORT, make this process one rank of a larger run.

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "protocol/task.h"
#include "training/distributed.h"

namespace vt::cli {

struct RankArgs {
  int nproc = 0;
  int rank = -1;
  int world_size = 0;
  std::string master_addr;
  int master_port = 0;
  double timeout_seconds = 120.0;
};

void add_rank_options(CLI::App* cmd, RankArgs& args);

struct RankPlan {
  int launch = 0;                     // > 1: start this many local ranks, wait for them
  training::DistributedOptions join;  // world_size > 1: this process is rank join.rank
};

// What the flags, the environment and the task's world_size ask for; usage errors named.
Result<RankPlan> plan_ranks(const RankArgs& args, const Task& task);

// Starts plan.launch copies of this command line, each with RANK, WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT set, and waits. When one fails the others are stopped (SIGTERM, SIGKILL after a
// grace period) and the failure is the result.
Result<int> launch_local_ranks(const RankPlan& plan);

// A follower rank's whole `train` (provider/ranks.h).
Result<int> run_follower_rank(const Task& task, const std::string& task_file,
                              const std::string& device, bool checkpoint_activations,
                              std::shared_ptr<training::Collective> collective);

}  // namespace vt::cli

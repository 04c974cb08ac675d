#include "cli/train_ranks.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>
#include <vector>

#include "common/process.h"
#include "provider/ranks.h"
#include "training/zoo/sizes.h"
#include "training/zoo/zoo.h"

namespace vt::cli {
namespace {

// This process's own command line, less --nproc: what every local rank runs.
Result<std::vector<std::string>> own_arguments() {
  // /proc files report size 0: read to the end rather than by size.
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (std::size_t start = 0; start < raw.size();) {
    std::size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    args.push_back(raw.substr(start, end - start));
    start = end + 1;
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc") {
      ++i;
      continue;
    }
    if (args[i].rfind("--nproc=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  if (out.empty()) return internal_error("reading /proc/self/cmdline: empty");
  std::error_code ec;
  out[0] = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return io_error("reading /proc/self/exe: " + ec.message());
  return out;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "ended (status " + std::to_string(status) + ")";
}

Errc errc_of(int status) {
  if (WIFEXITED(status) && WEXITSTATUS(status) >= 1 && WEXITSTATUS(status) <= 4) {
    return static_cast<Errc>(WEXITSTATUS(status));
  }
  return Errc::kIo;
}

}  // namespace

void add_rank_options(CLI::App* cmd, RankArgs& a) {
  cmd->add_option(
         "--nproc", a.nproc,
         "Start N local ranks (like torchrun --nproc-per-node); default: the task's world_size")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--rank", a.rank, "This process's rank in a multi-machine run (or $RANK)")
      ->check(CLI::Range(0, 1 << 16));
  cmd->add_option("--world-size", a.world_size, "Ranks in the whole run (or $WORLD_SIZE)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--master-addr", a.master_addr,
                  "Where rank 0 hosts the rendezvous (or $MASTER_ADDR; default 127.0.0.1)");
  cmd->add_option("--master-port", a.master_port,
                  "Its TCP port (or $MASTER_PORT; default 29500, --nproc: a free one)")
      ->check(CLI::Range(1, 65535));
  cmd->add_option("--rank-timeout", a.timeout_seconds,
                  "Seconds a rank waits for another before the run stops")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
}

Result<RankPlan> plan_ranks(const RankArgs& a, const Task& task) {
  RankPlan plan;
  training::DistributedOptions& d = plan.join;
  VT_RETURN_IF_ERROR(training::read_distributed_env(d));
  const bool from_env = std::getenv("WORLD_SIZE") != nullptr;
  if (a.world_size > 0) d.world_size = a.world_size;
  if (a.rank >= 0) d.rank = a.rank;
  if (!a.master_addr.empty()) d.master_addr = a.master_addr;
  if (a.master_port > 0) d.master_port = a.master_port;
  d.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout_seconds * 1000.0));
  int world = d.world_size;
  if (a.nproc > 0) {
    if (a.rank >= 0 || a.world_size > 0) {
      return invalid_input(
          "--nproc starts every rank on this machine itself; leave out --rank and --world-size");
    }
    world = a.nproc;
  } else if (a.world_size == 0 && !from_env) {
    world = static_cast<int>(task.world_size);
  }
  if (world < 1 || (world & (world - 1)) != 0 || task.gradient_groups % world != 0) {
    return invalid_input("world size " + std::to_string(world) +
                         ": expected a power of two dividing the task's gradient_groups (" +
                         std::to_string(task.gradient_groups) +
                         "); each rank trains G/W whole groups");
  }
  const bool joining = a.nproc == 0 && (a.world_size > 0 || from_env);
  if (joining) {
    d.world_size = world;
    if (d.rank >= world) {
      return invalid_input("rank " + std::to_string(d.rank) + ": expected 0 ... " +
                           std::to_string(world - 1));
    }
    return plan;
  }
  d.world_size = 1;
  d.rank = 0;
  if (world > 1) {
    VT_ASSIGN_OR_RETURN(const training::TrainingTask resolved, training::resolve_options(task));
    VT_RETURN_IF_ERROR(training::check_local_ranks(
        resolved, world, a.nproc > 0 ? "--nproc" : "world_size", training::usable_memory()));
    plan.launch = world;
    d.world_size = world;
    if (a.master_port == 0 && std::getenv("MASTER_PORT") == nullptr) {
      VT_ASSIGN_OR_RETURN(std::uint16_t port, free_loopback_port());
      d.master_port = port;
    }
    if (a.master_addr.empty() && std::getenv("MASTER_ADDR") == nullptr) d.master_addr = "127.0.0.1";
  }
  return plan;
}

Result<int> launch_local_ranks(const RankPlan& plan) {
  VT_ASSIGN_OR_RETURN(std::vector<std::string> args, own_arguments());
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::map<pid_t, int> alive;  // pid -> rank
  auto stop_all = [&alive] {
    for (auto& [pid, rank] : alive) {
      ::kill(pid, SIGTERM);
      ::kill(pid, SIGCONT);  // a stopped rank acts on SIGTERM only once it runs again
    }
  };
  const pid_t launcher = ::getpid();
  for (int r = 0; r < plan.launch; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      stop_all();
      return io_error("starting rank " + std::to_string(r) + ": fork failed");
    }
    if (pid == 0) {
      // A launcher killed outright (kill -9: no stop_all) must not leave ranks training on and
      // holding the workdir's lock. SIGKILL, not SIGTERM: a hung (stopped) rank acts on nothing
      // else, and the workdir is crash-safe. It survives execv; the getppid() check covers a
      // launcher that died before the prctl.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher) ::_exit(127);
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(plan.launch).c_str(), 1);
      ::setenv("MASTER_ADDR", plan.join.master_addr.c_str(), 1);
      ::setenv("MASTER_PORT", std::to_string(plan.join.master_port).c_str(), 1);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    alive.emplace(pid, r);
  }
  std::string failure;
  Errc code = Errc::kIo;
  auto failed_at = std::chrono::steady_clock::now();
  bool killed = false;
  while (!alive.empty()) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, failure.empty() ? 0 : WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;
    if (pid == 0) {  // after a failure: the others get a grace period, then SIGKILL
      if (!killed && std::chrono::steady_clock::now() - failed_at > std::chrono::seconds(10)) {
        for (auto& [p, rank] : alive) ::kill(p, SIGKILL);
        killed = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    auto it = alive.find(pid);
    if (it == alive.end()) continue;
    const int rank = it->second;
    alive.erase(it);
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && failure.empty()) {
      failure = "rank " + std::to_string(rank) + " " + describe(status);
      code = errc_of(status);
      failed_at = std::chrono::steady_clock::now();
      stop_all();
    }
  }
  if (!failure.empty()) {
    return Error{
        code,
        failure +
            "; stopped the other ranks. Run the same command to resume after the last commitment"};
  }
  return 0;
}

Result<int> run_follower_rank(const Task& task, const std::string& task_file,
                              const std::string& device, bool checkpoint_activations,
                              std::shared_ptr<training::Collective> collective) {
  provider::FollowerOptions o;
  o.task_dir = std::filesystem::path(task_file).parent_path();
  o.device = device;
  o.checkpoint_activations = checkpoint_activations;
  o.collective = std::move(collective);
  const int rank = o.collective->rank();
  Status st = provider::run_follower(task, o);
  if (!st) return st.error().context("rank " + std::to_string(rank));
  return 0;
}

}  // namespace vt::cli

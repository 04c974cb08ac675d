// The provider service under a flood (docs/benchmarks.md, "Under a flood"), over loopback TLS
// with the default limits and the provider's own workdir catalog. A probe does what a verifier
// does, every --interval-ms: connect, TLS handshake, hello, get_task, on a fresh connection. It
// runs on the idle server (the baseline), then beside each attack in turn, for --seconds each,
// and all of that --rounds times; each figure pools its phase's probes over the rounds:
//
//   silent_N               N TCP connections (--silent, default 70,500,2000) that never send a
//                          byte, each replaced as soon as the server drops it, from the probe's
//                          own address (so admission by address cannot tell them apart from the
//                          verifier); 2000 is more than the server's 1024 silent slots, so
//                          there the flood churns as fast as the server drops it
//   delta                  --delta-clients clients asking for deltas of random epochs against
//                          random committed bases: an encode each that no cache can answer
//
// Figures per phase P:
//   P_answered             fraction of the probe's get_task answered (goal >= 0.99)
//   P_median_ms, P_p99_ms, P_max_ms
//                          connect + handshake + hello + get_task, answered probes only
//   P_request_median_ms    get_task alone, on the connection just opened
//   P_vs_idle              P_median_ms / idle_median_ms (goal <= 3)
//   P_request_vs_idle      the same for get_task alone
//   P_attack_connections   connections the attacker opened (silent phases)
//   P_attack_requests      deltas the attacker was served (delta phase)
//   P_first_failure        what the first failed probe was told, when one failed
//
//   bench_flood [--json] [--seconds S] [--rounds N] [--interval-ms N] [--epochs N]
//               [--floats N] [--delta-clients N] [--silent N,N,...] [--dir SCRATCH]

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "bench/bench_util.h"
#include "common/safetensors.h"
#include "common/sha256.h"
#include "fingerprint/merkle.h"
#include "protocol/keys.h"
#include "protocol/log.h"
#include "protocol/net/client.h"
#include "protocol/net/server.h"
#include "provider/workdir/store.h"
#include "provider/workdir/workdir.h"
#include "provider/workdir_catalog.h"
#include "tests/protocol/flood.h"
#include "training/zoo/zoo.h"

namespace {

namespace fs = std::filesystem;
using namespace vt;
using Clock = std::chrono::steady_clock;
using bench::seconds_since;

constexpr char kToken[] = "bench flood token";

struct Args {
  double seconds = 4;  // per phase and round
  int rounds = 3;
  int interval_ms = 20;
  int epochs = 12;
  std::size_t floats = 1u << 20;  // 4 MiB of weights per snapshot
  int delta_clients = 4;
  std::vector<std::size_t> silent = {70, 500, 2000};
  std::string dir;
};

// A workdir as `train` leaves it: task.json, a signed log, and snapshots stored as deltas with a
// full one every 4 epochs. The weights drift a little per epoch, so deltas pay.
Result<std::vector<Digest>> write_workdir(const fs::path& dir, const Args& args) {
  VT_ASSIGN_OR_RETURN(Task task, training::default_task("mlp", "synthetic"));
  VT_ASSIGN_OR_RETURN(provider::Workdir workdir, provider::Workdir::open_for(dir, task));
  VT_ASSIGN_OR_RETURN(SigningKey key, SigningKey::generate());
  VT_ASSIGN_OR_RETURN(CommitLog log, CommitLog::open(workdir.log_file(), workdir.task_id(),
                                                     LogMode::kAppend, key.public_key()));
  provider::SnapshotStore store(workdir.snapshots_dir(), {4, 0, 64});
  std::vector<Digest> roots;
  Bytes previous;
  std::vector<float> weights(args.floats);
  for (int e = 0; e < args.epochs; ++e) {
    std::uint64_t x = 0x9E3779B97F4A7C15ull;
    for (std::size_t i = 0; i < weights.size(); ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const float base = static_cast<float>(static_cast<double>(x % 20000) / 10000.0 - 1.0);
      weights[i] = base + (i % 16 == 0 ? 0.001f * static_cast<float>(e) : 0.0f);
    }
    std::vector<TensorData> tensors = {
        {{"fc.weight", DType::kF32, {static_cast<std::int64_t>(weights.size())}},
         ByteSpan(reinterpret_cast<const std::uint8_t*>(weights.data()), weights.size() * 4)}};
    VT_ASSIGN_OR_RETURN(Bytes canonical, write_canonical(tensors, {{"epoch", std::to_string(e)}}));
    const Digest root = fp::merkle_root(canonical);
    std::optional<std::pair<Digest, ByteSpan>> base;
    if (!roots.empty()) base = std::make_pair(roots.back(), ByteSpan(previous));
    VT_RETURN_IF_ERROR(store.put(static_cast<std::uint64_t>(e), root, canonical, base));
    CommitRecord record;
    record.epoch = static_cast<std::uint64_t>(e);
    record.root = root;
    record.fingerprint = nlohmann::json{{"k", 1}, {"values", {weights[0]}}};
    record.tracking_fingerprint = nlohmann::json{{"values", nlohmann::json::array()}};
    record.data_order_digest = sha256("order " + std::to_string(e));
    record.metrics = {.loss = 0.5, .steps = 1, .seconds = 1.0, .samples = 8, .eval = std::nullopt};
    VT_RETURN_IF_ERROR(log.append(record, key));
    roots.push_back(root);
    previous = std::move(canonical);
  }
  return roots;
}

struct Phase {
  std::vector<double> total_ms, request_ms;
  std::uint64_t tries = 0;
  std::string first_failure;
};

// The verifier's probe: a fresh connection and one get_task every `interval` for `seconds`.
Phase probe(const ClientConfig& config, double seconds, int interval_ms) {
  Phase out;
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(seconds));
  auto next = Clock::now();
  while (Clock::now() < end) {
    ++out.tries;
    const auto start = Clock::now();
    auto client = Client::connect(config);
    Result<Bytes> task = client ? Result<Bytes>(Bytes{}) : Result<Bytes>(client.error());
    const auto asked = Clock::now();
    if (client) task = client->get_task();
    if (task.ok()) {
      out.total_ms.push_back(1e3 * seconds_since(start));
      out.request_ms.push_back(1e3 * seconds_since(asked));
    } else if (out.first_failure.empty()) {
      out.first_failure = task.error().message;
    }
    next += std::chrono::milliseconds(interval_ms);
    std::this_thread::sleep_until(std::max(next, Clock::now()));
  }
  return out;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

// Clients that each ask, one after another, for a delta of a random epoch against a random other
// committed epoch, until `stop`.
class DeltaFlood {
 public:
  DeltaFlood(const ClientConfig& config, const std::vector<Digest>& roots, int clients) {
    for (int c = 0; c < clients; ++c) {
      threads_.emplace_back([this, config, &roots, c] {
        std::mt19937_64 random(static_cast<std::uint64_t>(c) + 1);
        auto client = Client::connect(config);
        while (client && !stop_) {
          const std::size_t epoch = 1 + random() % (roots.size() - 1);
          std::size_t base = random() % roots.size();
          if (base == epoch) base = (base + 1) % roots.size();
          SnapshotRequest r;
          r.epoch = epoch;
          r.root = roots[epoch];
          r.codec = comp::Codec::kDelta;
          r.base_root = roots[base];
          if (client->fetch_container(r).ok()) ++served_;
        }
      });
    }
  }
  ~DeltaFlood() { stop(); }
  void stop() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  std::uint64_t served() const { return served_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> served_{0};
  std::vector<std::thread> threads_;
};

void report(bench::Report& out, const std::string& name, const Phase& p, double idle_median,
            double idle_request_median) {
  const double median = percentile(p.total_ms, 0.5);
  const double request = percentile(p.request_ms, 0.5);
  out.add(
      name + "_answered",
      p.tries == 0 ? 0.0 : static_cast<double>(p.total_ms.size()) / static_cast<double>(p.tries));
  out.add(name + "_probes", p.tries);
  out.add(name + "_median_ms", median);
  out.add(name + "_p99_ms", percentile(p.total_ms, 0.99));
  out.add(name + "_max_ms", percentile(p.total_ms, 1.0));
  out.add(name + "_request_median_ms", request);
  if (idle_median > 0) {
    out.add(name + "_vs_idle", median / idle_median);
    out.add(name + "_request_vs_idle", request / idle_request_median);
  }
  if (!p.first_failure.empty()) out.add(name + "_first_failure", p.first_failure);
}

int run(const Args& args, bench::Report& out) {
  const fs::path scratch =
      args.dir.empty() ? fs::temp_directory_path() / ("vt-bench-flood-" + std::to_string(getpid()))
                       : fs::path(args.dir);
  fs::remove_all(scratch);
  auto roots = write_workdir(scratch / "wd", args);
  auto identity =
      roots ? generate_identity(scratch / "keys") : Result<IdentitySummary>(roots.error());
  auto catalog = identity ? provider::open_workdir_catalog(scratch / "wd")
                          : Result<std::shared_ptr<Catalog>>(identity.error());
  if (!catalog) {
    std::cerr << "bench_flood: " << catalog.error().message << "\n";
    return 3;
  }
  const KeyFiles keys = KeyFiles::in(scratch / "keys");
  ServerConfig config;  // the defaults a provider serves with
  config.tls_cert = keys.tls_cert;
  config.tls_key = keys.tls_key;
  config.token = kToken;
  auto server = Server::start(config, *catalog);
  if (!server) {
    std::cerr << "bench_flood: " << server.error().message << "\n";
    return 3;
  }
  ClientConfig client;
  client.port = (*server)->endpoint().port;
  client.token = kToken;
  client.pin_sha256 = identity->tls_cert_fingerprint;
  client.connect_timeout = std::chrono::seconds(5);
  client.io_timeout = std::chrono::seconds(10);

  out.add("delta_snapshot_bytes", args.floats * 4);
  out.add("rounds", args.rounds);
  // Phase name -> samples over all rounds, and what its attacker did.
  std::map<std::string, Phase> phases;
  std::map<std::string, std::uint64_t> attacks;
  auto add = [&](const std::string& name, Phase p) {
    Phase& all = phases[name];
    all.total_ms.insert(all.total_ms.end(), p.total_ms.begin(), p.total_ms.end());
    all.request_ms.insert(all.request_ms.end(), p.request_ms.begin(), p.request_ms.end());
    all.tries += p.tries;
    if (all.first_failure.empty()) all.first_failure = p.first_failure;
  };
  // Round after round, so that load from other processes on a shared machine falls on every
  // phase alike instead of on whichever ran while it lasted.
  for (int round = 0; round < args.rounds; ++round) {
    add("idle", probe(client, args.seconds, args.interval_ms));
    for (std::size_t count : args.silent) {
      testing::SilentFloodOptions o;
      o.port = client.port;
      o.count = count;
      o.duration = std::chrono::milliseconds(static_cast<int>(args.seconds * 1000) + 3000);
      testing::SilentFlood flood(o);
      std::this_thread::sleep_for(std::chrono::seconds(1));  // let it fill the server's pools
      const std::string name = "silent_" + std::to_string(count);
      add(name, probe(client, args.seconds, args.interval_ms));
      flood.stop();
      attacks[name + "_attack_connections"] += flood.opened();
      std::this_thread::sleep_for(std::chrono::seconds(1));  // the server drops what is left
    }
    DeltaFlood flood(client, *roots, args.delta_clients);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    add("delta", probe(client, args.seconds, args.interval_ms));
    flood.stop();
    attacks["delta_attack_requests"] += flood.served();
  }
  const double idle_median = percentile(phases["idle"].total_ms, 0.5);
  const double idle_request = percentile(phases["idle"].request_ms, 0.5);
  report(out, "idle", phases["idle"], 0, 0);
  for (std::size_t count : args.silent) {
    const std::string name = "silent_" + std::to_string(count);
    report(out, name, phases[name], idle_median, idle_request);
    out.add(name + "_attack_connections", attacks[name + "_attack_connections"]);
  }
  report(out, "delta", phases["delta"], idle_median, idle_request);
  out.add("delta_attack_requests", attacks["delta_attack_requests"]);
  (*server)->stop();
  if (args.dir.empty()) fs::remove_all(scratch);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"The provider service under a connection flood and a delta flood, over loopback"};
  app.add_option("--seconds", args.seconds, "Probe time per phase and round");
  app.add_option("--rounds", args.rounds, "Rounds over all phases")->check(CLI::Range(1, 100));
  app.add_option("--interval-ms", args.interval_ms, "Time between two probes");
  app.add_option("--epochs", args.epochs, "Committed epochs in the served workdir")
      ->check(CLI::Range(3, 1000));
  app.add_option("--floats", args.floats, "F32 weights per snapshot");
  app.add_option("--delta-clients", args.delta_clients, "Clients asking for random deltas");
  app.add_option("--silent", args.silent, "Silent flood sizes, one phase each")->delimiter(',');
  app.add_option("--dir", args.dir, "Scratch folder (kept); default: a temporary one");
  if (auto code = bench::parse_flags(app, argc, argv)) return *code;
  bench::Report out(argc, argv);
  return run(args, out);
}

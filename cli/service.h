#pragma once
// Starting the provider service for `serve` and `train --serve`: flags, TLS material, the
// bearer token and the optional Prometheus endpoint.

#include <memory>
#include <string>
#include <thread>

#include "cli/app.h"
#include "cli/train_metrics.h"
#include "protocol/net/metrics.h"
#include "protocol/net/server.h"

namespace vt::cli {

struct ServeArgs {
  std::string listen;  // HOST:PORT
  std::string tls_cert, tls_key;
  std::string token_file;  // default: <workdir>/serve.token, created with a random token
  bool insecure = false;
  std::string metrics;  // HOST:PORT for /metrics
  std::string key_dir;  // keygen's folder: its tls.*.pem; default: <workdir>/keys
  // The task that trace requests replay (docs/dispute.md): its data resolve beside it.
  // Default: the workdir's own task.json.
  std::string task_file;
};

// `listen_required`: serve needs --listen; train only serves when it is given.
void add_serve_options(CLI::App* cmd, ServeArgs& args, bool listen_required);

struct Service {
  std::unique_ptr<Server> server;
  std::unique_ptr<MetricsServer> metrics;
};

// Starts serving `workdir` (which must exist); tells the operator on stderr where, with which
// certificate pin and token file. `training`, when given, joins the server's counters on
// --metrics.
Result<Service> start_service(const std::string& workdir, const ServeArgs& args,
                              const std::shared_ptr<const TrainMetrics>& training = nullptr);

// --metrics HOST:PORT alone (train without --serve): training gauges and /healthz. Says on
// stderr which port it bound (port 0 picks one).
Result<std::unique_ptr<MetricsServer>> start_metrics(
    const std::string& address, const std::shared_ptr<const Metrics>& server,
    const std::shared_ptr<const TrainMetrics>& training);

Result<std::pair<std::string, std::uint16_t>> parse_host_port(const std::string& text,
                                                              const std::string& flag);

}  // namespace vt::cli

namespace vt::cli {

// SIGINT/SIGTERM handling once service threads exist: block both in every thread (call before
// starting any), then wait for one in the thread that should react.
void block_termination_signals();
int wait_for_termination_signal();  // returns the signal number

// How `train` ends when interrupted. Everything it writes is crash-safe, so an interrupt may end
// the process at once: it says which epoch is committed (a later `train` resumes after it), or,
// once training has finished and the process only serves, that serving stopped (exit 0; else
// 130). Made before any thread starts, since it blocks the signals in every thread and answers
// them on one of its own.
class TrainInterrupts {
 public:
  TrainInterrupts(std::int64_t epochs, const std::string& workdir);
  ~TrainInterrupts();
  TrainInterrupts(const TrainInterrupts&) = delete;
  TrainInterrupts& operator=(const TrainInterrupts&) = delete;

  void committed(std::int64_t epoch);  // the latest durable commitment
  void trained();                      // every epoch committed: an interrupt now ends serving
  // Blocks until an interrupt ends the process: `train --serve` serving after training.
  [[noreturn]] void serve_until_interrupted();

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::thread waiter_;
};

}  // namespace vt::cli

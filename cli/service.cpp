#include "cli/service.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>

#include "cli/app.h"
#include "common/file_io.h"
#include "common/process.h"
#include "protocol/keys.h"
#include "provider/workdir_catalog.h"

namespace vt::cli {
namespace fs = std::filesystem;

void add_serve_options(CLI::App* cmd, ServeArgs& a, bool listen_required) {
  auto* listen = cmd->add_option(
      listen_required ? "--listen" : "--serve", a.listen,
      "Serve the workdir over TLS on HOST:PORT (port 0: any free port), or on fd:N, a "
      "listening socket this process inherited as descriptor N (socket activation)");
  if (listen_required) listen->required();
  cmd->add_option("--tls-cert", a.tls_cert,
                  "TLS certificate (PEM); default: the key folder's tls.cert.pem");
  cmd->add_option("--tls-key", a.tls_key,
                  "TLS private key (PEM); default: the key folder's tls.key.pem");
  cmd->add_option("--token-file", a.token_file,
                  "Bearer token clients must present; default: <workdir>/serve.token");
  cmd->add_flag("--insecure", a.insecure, "Plain TCP instead of TLS (loopback addresses only)");
  cmd->add_option(
      "--metrics", a.metrics,
      "Expose Prometheus metrics at http://HOST:PORT/metrics and a liveness check at /healthz "
      "(port 0: any free port, printed)");
}

Result<std::pair<std::string, std::uint16_t>> parse_host_port(const std::string& text,
                                                              const std::string& flag) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return invalid_input(flag + ": expected HOST:PORT, got \"" + text + "\"");
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::optional<std::uint16_t> port =
      parse_integer<std::uint16_t>(std::string_view(text).substr(colon + 1));
  if (!port)
    return invalid_input(flag + ": \"" + text.substr(colon + 1) + "\" is not a port number");
  return std::make_pair(host, *port);
}

namespace {

Result<std::string> read_or_create_token(const std::string& workdir,
                                         const std::string& token_file) {
  fs::path file = token_file.empty() ? fs::path(workdir) / "serve.token" : fs::path(token_file);
  if (!fs::exists(file)) {
    if (!token_file.empty()) return invalid_input("--token-file " + token_file + " does not exist");
    Bytes random(32);
    if (RAND_bytes(random.data(), 32) != 1) return internal_error("OpenSSL RAND_bytes failed");
    VT_RETURN_IF_ERROR(
        write_file_atomic(file, hex_encode(random) + "\n", 0600, Overwrite::kRefuse));
    spdlog::info("wrote a new access token to {} (give it to verifiers)", file.string());
  }
  VT_ASSIGN_OR_RETURN(std::string token, read_secret_file(file, 4096));
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' '))
    token.pop_back();
  if (token.size() < 16)
    return invalid_input(file.string() + ": a token must have at least 16 characters");
  return token;
}

// Trace requests are answered by `veritrain-torch trace` in a child process: a replay needs
// LibTorch (the light `serve` has none) and a trainer of its own (`train --serve` is training).
provider::TraceAnswerer trace_answerer(const std::string& workdir, const ServeArgs& a) {
  const fs::path task =
      a.task_file.empty() ? fs::path(workdir) / "task.json" : fs::path(a.task_file);
  return [program = torch_program(), task, workdir,
          key = a.key_dir](const TraceRequest& r) -> Result<Bytes> {
    char pattern[] = "/tmp/veritrain-trace-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) return io_error("making a folder for a trace answer");
    const fs::path dir = pattern;
    struct Cleanup {
      fs::path dir;
      ~Cleanup() {
        std::error_code ec;
        fs::remove_all(dir, ec);
      }
    } cleanup{dir};
    std::vector<std::string> args = {program.string(), "trace",
                                     "--task",         task.string(),
                                     "--workdir",      workdir,
                                     "--epoch",        std::to_string(r.epoch),
                                     "--step",         std::to_string(r.step),
                                     "--out",          (dir / "answer.json").string()};
    if (r.call) args.insert(args.end(), {"--call", std::to_string(*r.call)});
    if (!key.empty()) args.insert(args.end(), {"--key", key});
    VT_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::spawn(args, dir / "output.txt"));
    const int code = child.wait();
    if (code != 0) {
      auto said = read_text_file(dir / "output.txt", 1 << 16);
      std::string why = said.ok() ? *said : std::string("(no output)");
      while (!why.empty() && why.back() == '\n') why.pop_back();
      if (const auto at = why.find("error: "); at != std::string::npos) why = why.substr(at + 7);
      // What the request got wrong (a step the epoch does not have, a task that is not
      // portable) is the client's to hear; anything else is this side's failure.
      return code == exit_code(Errc::kInvalidInput) ? invalid_input(why)
                                                    : internal_error("veritrain trace: " + why);
    }
    return read_file(dir / "answer.json", std::uint64_t{1} << 31);
  };
}

}  // namespace

Result<Service> start_service(const std::string& workdir, const ServeArgs& a,
                              const std::shared_ptr<const TrainMetrics>& training) {
  ServerConfig config;
  if (a.listen.rfind("fd:", 0) == 0) {
    const std::optional<int> fd = parse_integer<int>(std::string_view(a.listen).substr(3));
    if (!fd || *fd <= STDERR_FILENO) {
      return invalid_input("--listen " + a.listen +
                           ": expected fd:N with N an inherited descriptor number, 3 or more");
    }
    config.listen_fd = *fd;
  } else {
    VT_ASSIGN_OR_RETURN(auto listen, parse_host_port(a.listen, "--listen"));
    config.host = listen.first;
    config.port = listen.second;
  }
  config.insecure = a.insecure;
  VT_ASSIGN_OR_RETURN(config.token, read_or_create_token(workdir, a.token_file));
  if (!a.insecure) {
    // The key folder `keygen` made is the provider's identity: its certificate is the one whose
    // pin keygen printed, so it is never replaced by a fresh one (only the workdir's own is made).
    const fs::path key_dir = a.key_dir.empty() ? fs::path(workdir) / "keys" : fs::path(a.key_dir);
    KeyFiles keys = KeyFiles::in(key_dir);
    if (a.tls_cert.empty() && !fs::exists(keys.tls_cert)) {
      if (!a.key_dir.empty()) {
        return invalid_input("--key " + a.key_dir +
                             ": no tls.cert.pem there (make the folder with veritrain keygen, "
                             "or give --tls-cert and --tls-key)");
      }
      VT_RETURN_IF_ERROR(generate_identity(key_dir));
    }
    config.tls_cert = a.tls_cert.empty() ? keys.tls_cert : fs::path(a.tls_cert);
    config.tls_key = a.tls_key.empty() ? keys.tls_key : fs::path(a.tls_key);
  }
  VT_ASSIGN_OR_RETURN(std::shared_ptr<Catalog> catalog,
                      provider::open_workdir_catalog(workdir, trace_answerer(workdir, a)));
  Service service;
  VT_ASSIGN_OR_RETURN(service.server, Server::start(config, catalog));
  const Endpoint ep = service.server->endpoint();
  spdlog::info("serving {} on {}:{} ({})", workdir, ep.host, ep.port,
               a.insecure ? "plain TCP" : "TLS 1.3");
  if (!a.insecure) {
    VT_ASSIGN_OR_RETURN(std::string pin, certificate_fingerprint(config.tls_cert));
    spdlog::info("certificate pin (verify --pin): {}", pin);
  }
  if (!a.metrics.empty()) {
    VT_ASSIGN_OR_RETURN(service.metrics,
                        start_metrics(a.metrics, service.server->metrics(), training));
  }
  return service;
}

Result<std::unique_ptr<MetricsServer>> start_metrics(
    const std::string& address, const std::shared_ptr<const Metrics>& server,
    const std::shared_ptr<const TrainMetrics>& training) {
  VT_ASSIGN_OR_RETURN(auto m, parse_host_port(address, "--metrics"));
  VT_ASSIGN_OR_RETURN(auto listener, MetricsServer::start(m.first, m.second, [server, training] {
                        return (server ? server->prometheus_text() : std::string()) +
                               (training ? training->prometheus_text() : std::string());
                      }));
  const std::string host = m.first.find(':') != std::string::npos ? "[" + m.first + "]" : m.first;
  spdlog::info("metrics at http://{}:{}/metrics (health: /healthz)", host, listener->port());
  return listener;
}

}  // namespace vt::cli

namespace vt::cli {

static sigset_t termination_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void block_termination_signals() {
  sigset_t set = termination_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int wait_for_termination_signal() {
  sigset_t set = termination_signals();
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

struct TrainInterrupts::State {
  std::atomic<bool> trained{false};
  std::atomic<std::int64_t> last_committed{-1};
  std::string rest;  // " of N is committed in WORKDIR; ..."
};

TrainInterrupts::TrainInterrupts(std::int64_t epochs, const std::string& workdir)
    : state_(std::make_shared<State>()) {
  state_->rest = " of " + std::to_string(epochs) + " is committed in " + workdir +
                 "; run the same command to go on from there\n";
  block_termination_signals();
  waiter_ = std::thread([state = state_] {
    wait_for_termination_signal();
    if (state->trained.load()) {
      std::cerr << "\nveritrain: stopped serving; training had finished\n";
      std::_Exit(0);
    }
    const std::int64_t last = state->last_committed.load();
    std::cerr << "\nveritrain: interrupted; "
              << (last < 0 ? std::string("no epoch") : "epoch " + std::to_string(last))
              << state->rest;
    std::_Exit(130);
  });
}

// Returning from `train` ends the process (its main returns): the waiter, blocked in sigwait,
// is left to end with it.
TrainInterrupts::~TrainInterrupts() {
  if (waiter_.joinable()) waiter_.detach();
}

void TrainInterrupts::committed(std::int64_t epoch) { state_->last_committed.store(epoch); }

void TrainInterrupts::trained() { state_->trained.store(true); }

void TrainInterrupts::serve_until_interrupted() {
  waiter_.join();  // the waiter ends the process on the interrupt; join never returns
  std::_Exit(0);
}

}  // namespace vt::cli

// Measures what docs/reliability.md quotes for a provider and a verifier under abuse, against the
// real `veritrain` binary:
//
//   abuse_measure VERITRAIN DIR stalled     server RSS: idle, and with 8 stalled downloaders of
//                                           one container (they ask, then never read)
//   abuse_measure VERITRAIN DIR idle        connect + hello + get_task with 200 idle
//                                           unauthenticated sockets open
//   abuse_measure VERITRAIN DIR verify MODE SECONDS
//                                           `verify --deadline SECONDS` against a hostile
//                                           provider (MODE drip, endless, forged or empty): wall
//                                           time, exit code, verdict, peak RSS
//
// DIR keeps the workdir between runs (a task with a ~50 MB snapshot, trained once).

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <thread>

#include "common/file_io.h"
#include "common/json.h"
#include "protocol/net/client.h"
#include "tests/adversary/support.h"
#include "tests/protocol/hostile_provider.h"
#include "tests/protocol/net_util.h"
#include "tests/test_util.h"

namespace vt::adversary {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

Task measured_task() {
  Task task = tiny_task(7, /*epochs=*/2);
  task.model.options = {{"input_dim", 1024}, {"hidden", 2048}, {"layers", 2}, {"classes", 10}};
  task.dataset.options = {{"samples", 64}, {"input_dim", 1024}, {"classes", 10}};
  return task;
}

Result<CheatRun> workdir(const fs::path& dir) {
  const fs::path wd = dir / "wd";
  if (fs::exists(wd / "commitments.log")) {
    VT_ASSIGN_OR_RETURN(LogFile log, read_log(wd / "commitments.log"));
    CheatRun run{wd, {}};
    for (const auto& r : log.records) run.roots.push_back(r.record.root);
    return run;
  }
  return write_workdir(measured_task(), wd, {}, provider_key());
}

std::uint64_t rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}

pid_t spawn(const std::vector<std::string>& args) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

struct Served {
  pid_t pid = -1;
  std::uint16_t port = 0;
  std::string token;
  ~Served() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

Result<int> serve(const std::string& veritrain, const CheatRun& run, Served& s) {
  s.port = testing::free_port();
  s.pid = spawn({veritrain, "--log-level", "warn", "serve", "--workdir", run.workdir.string(),
                 "--listen", "127.0.0.1:" + std::to_string(s.port), "--insecure"});
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    int fd = testing::connect_loopback(s.port);
    if (fd >= 0) {
      ::close(fd);
      VT_ASSIGN_OR_RETURN(s.token, read_secret_file(run.workdir / "serve.token"));
      while (!s.token.empty() && s.token.back() == '\n') s.token.pop_back();
      return 0;
    }
  }
  return io_error("veritrain serve did not start listening");
}

ClientConfig client(const Served& s) {
  ClientConfig c;
  c.port = s.port;
  c.insecure = true;
  c.token = s.token;
  return c;
}

Result<int> stalled(const std::string& veritrain, const CheatRun& run) {
  Served s;
  VT_RETURN_IF_ERROR(serve(veritrain, run, s));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const std::uint64_t idle = rss_kib(s.pid);
  const std::uint64_t container =
      fs::file_size(run.workdir / "snapshots" / (hex_encode(run.roots[0]) + ".vtc"));
  std::vector<Connection> downloaders;
  for (int i = 0; i < 8; ++i) {
    VT_ASSIGN_OR_RETURN(Connection c, Connection::open(client(s)));
    VT_RETURN_IF_ERROR(c.send(wire::MessageType::kHello,
                              {{"versions", {wire::kProtocolVersion}}, {"token", s.token}}));
    VT_ASSIGN_OR_RETURN(wire::Frame hello, c.read_frame());
    if (hello.type != wire::MessageType::kHello) return io_error("the server did not answer hello");
    // Ask for the whole epoch-0 container and never read it.
    VT_RETURN_IF_ERROR(
        c.send(wire::MessageType::kGetSnapshot, {{"epoch", 0}, {"codec", "planes"}}));
    downloaders.push_back(std::move(c));
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const std::uint64_t loaded = rss_kib(s.pid);
  const double allowed = static_cast<double>(idle) + 1.2 * static_cast<double>(container) / 1024.0;
  std::cout << "stalled: container " << container / 1024 << " KiB; server RSS idle " << idle
            << " KiB, with 8 "
            << "stalled downloaders " << loaded << " KiB (+" << (loaded - idle) << " KiB = "
            << static_cast<double>(loaded - idle) * 1024.0 / static_cast<double>(container)
            << " x the container); limit idle + 1.2 x container = "
            << static_cast<std::uint64_t>(allowed)
            << " KiB: " << (static_cast<double>(loaded) <= allowed ? "ok" : "OVER") << "\n";
  return static_cast<double>(loaded) <= allowed ? 0 : 1;
}

Result<int> idle_sockets(const std::string& veritrain, const CheatRun& run) {
  Served s;
  VT_RETURN_IF_ERROR(serve(veritrain, run, s));
  std::vector<int> idle;
  idle.reserve(200);
  for (int i = 0; i < 200; ++i) idle.push_back(testing::connect_loopback(s.port));
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const auto start = Clock::now();
  VT_ASSIGN_OR_RETURN(Client c, Client::connect(client(s)));
  VT_ASSIGN_OR_RETURN(Bytes task, c.get_task());
  const double took = testing::seconds_since(start);
  std::cout << "idle: with 200 idle unauthenticated sockets open, connect + hello + get_task ("
            << task.size() << " bytes) took " << took << " s: " << (took < 1.0 ? "ok" : "OVER 1 s")
            << "\n";
  for (int fd : idle) ::close(fd);
  return took < 1.0 ? 0 : 1;
}

Result<int> hostile_verify(const std::string& veritrain, const CheatRun& run,
                           const std::string& mode, const std::string& seconds) {
  testing::HostileOptions o;
  o.mode = mode == "endless"  ? testing::Hostility::kEndlessLog
           : mode == "forged" ? testing::Hostility::kForgedEndlessLog
           : mode == "empty"  ? testing::Hostility::kEmptyLogFrames
                              : testing::Hostility::kDrip;
  VT_ASSIGN_OR_RETURN(o.task, read_file(run.workdir / "task.json"));
  VT_ASSIGN_OR_RETURN(LogFile log, read_log(run.workdir / "commitments.log"));
  for (const auto& r : log.records) o.log_lines.push_back(encode_record(r));
  for (const Digest& root : run.roots) o.roots_hex.push_back(hex_encode(root));
  o.declared_size = fs::file_size(run.workdir / "snapshots" / (hex_encode(run.roots[0]) + ".vtc"));
  o.drip_bytes = 1;
  o.drip_every = std::chrono::milliseconds(1000);  // one byte a second
  testing::HostileProvider provider(o);
  const fs::path dir = run.workdir.parent_path() / ("verify-" + mode);
  fs::remove_all(dir);
  fs::create_directories(dir);
  VT_RETURN_IF_ERROR(write_file_atomic(
      dir / "token", std::string_view("hostile provider token 0123456789\n"), 0600));
  const auto start = Clock::now();
  pid_t pid = spawn({veritrain, "--log-level", "warn", "verify", "--task",
                     (run.workdir / "task.json").string(), "--provider",
                     "127.0.0.1:" + std::to_string(provider.port()), "--insecure", "--token-file",
                     (dir / "token").string(), "--check-probability", "1", "--jobs", "1",
                     "--deadline", seconds, "--report", (dir / "report").string()});
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  const double took = testing::seconds_since(start);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::string verdict = "(no verdict.json)";
  if (auto text = read_text_file(dir / "report" / "verdict.json"); text.ok()) {
    auto j = parse_json(*text, "verdict");
    if (j.ok()) {
      const nlohmann::json body = j->value("verdict", nlohmann::json::object());
      const nlohmann::json reasons = body.value("reasons", nlohmann::json::array());
      verdict = "result " + body.value("result", std::string("?")) + ", signed " +
                (j->contains("signature") ? "yes" : "no") +
                ", first reason: " + (reasons.empty() ? std::string("-") : reasons[0].dump());
    }
  }
  auto state = read_file(run.workdir / "snapshots" / (hex_encode(run.roots[0]) + ".vtc"));
  auto info = state.ok() ? vt::comp::read_container_info(*state)
                         : vt::Result<vt::comp::ContainerInfo>(state.error());
  const std::uint64_t state_bytes = info.ok() ? info->raw_size : 0;
  const double limit_kib = (2.0 * static_cast<double>(state_bytes) + 256.0 * 1048576.0) / 1024.0;
  std::cout << "state (canonical snapshot) " << state_bytes / 1024 << " KiB\n";
  std::cout << "verify vs " << mode << " provider, --deadline " << seconds << ": exit " << code
            << " after " << took << " s, " << verdict << ", peak RSS " << usage.ru_maxrss
            << " KiB (limit 2 x state + 256 MiB = " << static_cast<std::uint64_t>(limit_kib)
            << " KiB), provider frames sent " << provider.frames_sent() << "\n";
  return code == 1 && static_cast<double>(usage.ru_maxrss) < limit_kib ? 0 : 1;
}

}  // namespace
}  // namespace vt::adversary

namespace {

int measure(int argc, char** argv) {
  using namespace vt::adversary;
  if (argc < 4) {
    std::cerr << "usage: abuse_measure VERITRAIN DIR stalled|idle|verify "
                 "[drip|endless|forged|empty SECONDS]\n";
    return 2;
  }
  const std::string veritrain = argv[1], what = argv[3];
  auto run = workdir(argv[2]);
  if (!run.ok()) {
    std::cerr << run.error().message << "\n";
    return 3;
  }
  vt::Result<int> r = what == "stalled" ? stalled(veritrain, *run)
                      : what == "idle"  ? idle_sockets(veritrain, *run)
                      : what == "verify" && argc >= 6
                          ? hostile_verify(veritrain, *run, argv[4], argv[5])
                          : vt::Result<int>(vt::invalid_input("unknown measurement " + what));
  if (!r.ok()) {
    std::cerr << r.error().message << "\n";
    return 3;
  }
  return *r;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return measure(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "abuse_measure: " << e.what() << "\n";
    return 3;
  }
}

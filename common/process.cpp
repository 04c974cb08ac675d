#include "common/process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

namespace vt {
namespace {

// This process's environment with `extra` laid over it: an entry of `extra` replaces one of the
// same name. The strings live in `storage`.
std::vector<char*> child_environment(const std::vector<std::string>& extra,
                                     std::vector<std::string>& storage) {
  storage.assign(extra.begin(), extra.end());
  auto overridden = [&](std::string_view entry) {
    const std::string_view name = entry.substr(0, entry.find('='));
    return std::ranges::any_of(extra, [&](const std::string& e) {
      return std::string_view(e).substr(0, e.find('=')) == name;
    });
  };
  for (char** e = environ; *e != nullptr; ++e) {
    if (!overridden(*e)) storage.emplace_back(*e);
  }
  std::vector<char*> out;
  out.reserve(storage.size() + 1);
  for (std::string& s : storage) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

Result<ChildProcess> ChildProcess::spawn(const std::vector<std::string>& args,
                                         const std::filesystem::path& output, int pass_fd,
                                         const std::vector<std::string>& env) {
  if (args.empty()) return invalid_input("spawn: no program given");
  constexpr int kPassedFd = 3;
  std::optional<Fd> moved;  // dup2 onto itself would leave close-on-exec set: pass a copy instead
  if (pass_fd == kPassedFd) {
    moved.emplace(::fcntl(pass_fd, F_DUPFD_CLOEXEC, kPassedFd + 1));
    if (moved->get() < 0)
      return io_error(std::string("spawn: duplicating descriptor 3: ") + std::strerror(errno));
    pass_fd = moved->get();
  }
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  if (pass_fd >= 0) posix_spawn_file_actions_adddup2(&actions, pass_fd, kPassedFd);
  ChildProcess child;
  pid_t pid = -1;
  std::vector<std::string> env_storage;
  const std::vector<char*> envp = child_environment(env, env_storage);
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return io_error("starting " + args[0] + ": " + std::strerror(rc));
  child.pid_ = pid;
  return child;
}

Result<ChildProcess> ChildProcess::spawn_talking(const std::vector<std::string>& args,
                                                 const std::filesystem::path& output,
                                                 const std::vector<std::string>& env) {
  if (args.empty()) return invalid_input("spawn: no program given");
  int pair[2];
  // Close-on-exec: only the dup2'd copies reach the child, and no later child inherits ours.
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return io_error(std::string("socketpair for ") + args[0] + ": " + std::strerror(errno));
  }
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, output.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, pair[1], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pair[1], STDOUT_FILENO);
  pid_t pid = -1;
  std::vector<std::string> env_storage;
  const std::vector<char*> envp = child_environment(env, env_storage);
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pair[1]);
  if (rc != 0) {
    ::close(pair[0]);
    return io_error("starting " + args[0] + ": " + std::strerror(rc));
  }
  ChildProcess child;
  child.pid_ = pid;
  child.channel_ = pair[0];
  return child;
}

std::vector<std::string> scrambled_memory_environment() {
  // perturb=165: a fresh block reads as 0x5a bytes (freed ones as 0xa5), a float of ~1.5e16.
  // mmap_max=0: no block comes straight from the kernel, whose pages read as zeros.
  return {"GLIBC_TUNABLES=glibc.malloc.perturb=165:glibc.malloc.mmap_max=0"};
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_), channel_(other.channel_), pending_(std::move(other.pending_)) {
  other.pid_ = -1;
  other.channel_ = -1;
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    terminate();
    pid_ = other.pid_;
    channel_ = other.channel_;
    pending_ = std::move(other.pending_);
    other.pid_ = -1;
    other.channel_ = -1;
  }
  return *this;
}

ChildProcess::~ChildProcess() { terminate(); }

void ChildProcess::close_channel() {
  if (channel_ >= 0) ::close(channel_);
  channel_ = -1;
}

Status ChildProcess::write_line(std::string_view line) {
  if (channel_ < 0) return internal_error("write_line: the child was not spawned talking");
  std::string out(line);
  out += '\n';
  for (std::size_t sent = 0; sent < out.size();) {
    const ssize_t n = ::send(channel_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return io_error(std::string("writing to a child process: ") + std::strerror(errno));
    sent += static_cast<std::size_t>(n);
  }
  return {};
}

Result<std::string> ChildProcess::read_line(std::size_t max) {
  if (channel_ < 0) return internal_error("read_line: the child was not spawned talking");
  for (;;) {
    if (const std::size_t end = pending_.find('\n'); end != std::string::npos) {
      std::string line = pending_.substr(0, end);
      pending_.erase(0, end + 1);
      return line;
    }
    if (pending_.size() > max)
      return io_error("a child process sent a line longer than " + std::to_string(max) + " bytes");
    char buf[4096];
    const ssize_t n = ::recv(channel_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return io_error(std::string("reading from a child process: ") + std::strerror(errno));
    if (n == 0) return io_error("the child process ended without answering");
    pending_.append(buf, static_cast<std::size_t>(n));
  }
}

bool ChildProcess::running() const {
  if (pid_ <= 0) return false;
  // WNOWAIT leaves an exited child unreaped, so wait() still gets its exit status.
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == 0;
}

int ChildProcess::wait() {
  close_channel();  // a talking child reads end of input: its cue to exit
  if (pid_ <= 0) return -1;
  int status = 0;
  // A signal landing in the parent interrupts waitpid; retry, or the child would stay a zombie
  // and its status would read as "exited 0".
  pid_t rc = 0;
  do {
    rc = ::waitpid(pid_, &status, 0);
  } while (rc < 0 && errno == EINTR);
  pid_ = -1;
  if (rc < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int ChildProcess::terminate() {
  close_channel();
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  return wait();
}

Result<std::uint16_t> free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return io_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!ok) return io_error("cannot bind a loopback port");
  return ntohs(addr.sin_port);
}

Result<LoopbackListener> listen_on_loopback() {
  LoopbackListener l{Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0))};
  if (l.fd.get() < 0) return io_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(l.fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(l.fd.get(), SOMAXCONN) != 0 ||
      ::getsockname(l.fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return io_error(std::string("listening on a loopback port: ") + std::strerror(errno));
  }
  l.port = ntohs(addr.sin_port);
  return l;
}

}  // namespace vt

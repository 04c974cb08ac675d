#include "common/file_io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/fd.h"

namespace vt {
namespace fs = std::filesystem;

std::string errno_text(int err, std::string_view action, const fs::path& path) {
  std::string what = std::strerror(err);
  if (err == ENOSPC) what = "disk full (no space left on device)";
  if (err == EROFS) what = "read-only file system";
  return std::string(action) + " " + path.string() + ": " + what;
}

namespace {

Status write_all(int fd, ByteSpan bytes, const fs::path& path) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(errno_text(errno, "writing", path));
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

Status private_mode(const fs::path& path, const struct stat& st) {
  if ((st.st_mode & 077) == 0) return {};
  char mode[8];
  std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return invalid_input(path.string() + " holds a secret but is open to group or others (mode " +
                       mode + "); make it private with: chmod 600 " + path.string());
}

Result<Bytes> read_opened(Fd& fd, const fs::path& path, std::uint64_t max_bytes, bool secret) {
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return io_error(errno_text(errno, "reading", path));
  if (!S_ISREG(st.st_mode)) {
    return invalid_input(path.string() + " is not a regular file (a FIFO, device or folder)");
  }
  if (secret) VT_RETURN_IF_ERROR(private_mode(path, st));
  auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes) {
    return invalid_input(path.string() + " is " + std::to_string(size) +
                         " bytes, more than the limit of " + std::to_string(max_bytes));
  }
  Bytes out(size);
  std::size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::read(fd.get(), out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(errno_text(errno, "reading", path));
    }
    if (n == 0) return io_error(path.string() + " shrank while being read");
    done += static_cast<std::size_t>(n);
  }
  return out;
}

// O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer that may never come; on a
// regular file the flag changes nothing.
int open_for_reading(const fs::path& path) {
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
}

}  // namespace

Status check_input_file(const fs::path& path, std::string_view what) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found)
    return invalid_input(std::string(what) + " " + path.string() + ": no such file");
  if (st.type() == fs::file_type::directory)
    return invalid_input(std::string(what) + " " + path.string() + " is a folder, not a file");
  return {};
}

Result<Bytes> read_file(const fs::path& path, std::uint64_t max_bytes) {
  Fd fd(open_for_reading(path));
  if (fd.get() < 0) return io_error(errno_text(errno, "opening", path));
  return read_opened(fd, path, max_bytes, /*secret=*/false);
}

Result<Bytes> read_file_head(const fs::path& path, std::uint64_t max_bytes) {
  Fd fd(open_for_reading(path));
  if (fd.get() < 0) return io_error(errno_text(errno, "opening", path));
  Bytes out;
  std::uint8_t chunk[1 << 16];
  while (out.size() < max_bytes) {
    const std::size_t want =
        static_cast<std::size_t>(std::min<std::uint64_t>(sizeof chunk, max_bytes - out.size()));
    const ssize_t n = ::read(fd.get(), chunk, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error(errno_text(errno, "reading", path));
    if (n == 0) break;
    out.insert(out.end(), chunk, chunk + n);
  }
  return out;
}

Result<Bytes> read_open_file(int fd, const fs::path& path, std::uint64_t max_bytes) {
  Fd borrowed(fd);
  auto bytes = read_opened(borrowed, path, max_bytes, /*secret=*/false);
  borrowed.release();  // the caller's to close
  return bytes;
}

Result<std::string> read_secret_file(const fs::path& path, std::uint64_t max_bytes) {
  Fd fd(open_for_reading(path));
  if (fd.get() < 0) return io_error(errno_text(errno, "opening", path));
  VT_ASSIGN_OR_RETURN(Bytes bytes, read_opened(fd, path, max_bytes, /*secret=*/true));
  return std::string(bytes.begin(), bytes.end());
}

Status check_secret_file(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return io_error(errno_text(errno, "reading", path));
  return private_mode(path, st);
}

Result<std::string> read_text_file(const fs::path& path, std::uint64_t max_bytes) {
  VT_ASSIGN_OR_RETURN(Bytes bytes, read_file(path, max_bytes));
  return std::string(bytes.begin(), bytes.end());
}

Status fsync_dir(const fs::path& dir) {
  Fd fd(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return io_error(errno_text(errno, "opening folder", dir));
  if (::fsync(fd.get()) != 0 && errno != EINVAL) {
    return io_error(errno_text(errno, "syncing folder", dir));
  }
  return {};
}

Status write_file_atomic(const fs::path& path, ByteSpan bytes, mode_t mode, Overwrite overwrite) {
  static std::atomic<unsigned> counter{0};
  fs::path dir = path.parent_path();
  if (overwrite == Overwrite::kRefuse && ::access(path.c_str(), F_OK) == 0) {
    return invalid_input(path.string() + " already exists; refusing to overwrite it");
  }
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (fd.get() < 0) return io_error(errno_text(errno, "creating", tmp));
  auto fail = [&](Error e) {
    ::unlink(tmp.c_str());
    return e;
  };
  if (auto s = write_all(fd.get(), bytes, path); !s) return fail(s.error());
  if (::fsync(fd.get()) != 0) return fail(io_error(errno_text(errno, "syncing", path)));
  if (::close(fd.release()) != 0) return fail(io_error(errno_text(errno, "closing", path)));
  if (overwrite == Overwrite::kRefuse) {
    // link() fails if the target appeared meanwhile, where rename() would replace it.
    if (::link(tmp.c_str(), path.c_str()) != 0) {
      return fail(errno == EEXIST
                      ? invalid_input(path.string() + " already exists; refusing to overwrite it")
                      : io_error(errno_text(errno, "creating", path)));
    }
    ::unlink(tmp.c_str());
  } else if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(io_error(errno_text(errno, "renaming into", path)));
  }
  return fsync_dir(dir);
}

std::size_t sweep_temp_files(const fs::path& dir) {
  std::size_t removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    // NAME.tmp.PID.N, as write_file_atomic names them.
    const auto tmp = name.rfind(".tmp.");
    if (tmp == std::string::npos) continue;
    const std::string rest = name.substr(tmp + 5);
    const auto dot = rest.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == rest.size()) continue;
    const std::string pid_text = rest.substr(0, dot);
    const std::string counter = rest.substr(dot + 1);
    auto digits = [](const std::string& t) {
      return t.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!digits(pid_text) || !digits(counter) || pid_text.size() > 9) continue;
    const auto pid = static_cast<pid_t>(std::stol(pid_text));
    // A live writer (a `serve` writing its token, say) keeps its file.
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    if (entry.is_regular_file(rm) && fs::remove(entry.path(), rm)) ++removed;
  }
  return removed;
}

Status append_durable(const fs::path& path, ByteSpan bytes) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (fd.get() < 0) return io_error(errno_text(errno, "opening", path));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return io_error(errno_text(errno, "reading", path));
  Status written = write_all(fd.get(), bytes, path);
  if (written && ::fsync(fd.get()) != 0) written = io_error(errno_text(errno, "syncing", path));
  if (!written) {
    // Cut a torn tail off so the file still ends on a whole record.
    if (::ftruncate(fd.get(), st.st_size) == 0) (void)::fsync(fd.get());
  }
  return written;
}

}  // namespace vt

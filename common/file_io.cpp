#include "common/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace vt {
namespace fs = std::filesystem;

std::string errno_text(int err, std::string_view action, const fs::path& path) {
  std::string what = std::strerror(err);
  if (err == ENOSPC) what = "disk full (no space left on device)";
  if (err == EROFS) what = "read-only file system";
  return std::string(action) + " " + path.string() + ": " + what;
}

namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { int fd = fd_; fd_ = -1; return fd; }

 private:
  int fd_;
};

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

}  // namespace

Result<Bytes> read_file(const fs::path& path, std::uint64_t max_bytes) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return io_error(errno_text(errno, "opening", path));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return io_error(errno_text(errno, "reading", path));
  if (!S_ISREG(st.st_mode)) return invalid_input(path.string() + " is not a regular file");
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
      return fail(errno == EEXIST ? invalid_input(path.string() + " already exists; refusing to overwrite it")
                                  : io_error(errno_text(errno, "creating", path)));
    }
    ::unlink(tmp.c_str());
  } else if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(io_error(errno_text(errno, "renaming into", path)));
  }
  return fsync_dir(dir);
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

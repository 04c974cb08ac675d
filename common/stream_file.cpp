#include "common/stream_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/file_io.h"

namespace vt {
namespace fs = std::filesystem;

Result<StreamFileWriter> StreamFileWriter::create(const fs::path& dir, const std::string& stem) {
  static std::atomic<unsigned> counter{0};
  fs::path tmp =
      dir / (stem + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++));
  Fd fd(::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) return io_error(errno_text(errno, "creating", tmp));
  return StreamFileWriter(std::move(tmp), std::move(fd));
}

StreamFileWriter::StreamFileWriter(StreamFileWriter&& other) noexcept
    : tmp_(std::move(other.tmp_)),
      fd_(std::move(other.fd_)),
      size_(other.size_),
      committed_(other.committed_) {
  other.committed_ = true;  // the moved-from writer owns no file
}

StreamFileWriter::~StreamFileWriter() {
  if (!committed_) ::unlink(tmp_.c_str());
}

Status StreamFileWriter::write_at(std::uint64_t offset, ByteSpan bytes) {
  if (offset > size_ || bytes.size() > size_ - offset)
    return internal_error(tmp_.string() + ": a write past what was appended");
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::pwrite(fd_.get(), bytes.data() + done, bytes.size() - done,
                         static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(errno_text(errno, "writing", tmp_));
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

Status StreamFileWriter::append(ByteSpan bytes) {
  const std::uint64_t at = size_;
  size_ += bytes.size();
  Status written = write_at(at, bytes);
  if (!written) size_ = at;
  return written;
}

Status StreamFileWriter::commit(const fs::path& path, Durability durability) {
  if (committed_) return internal_error(path.string() + ": committed twice");
  const bool durable = durability == Durability::kDurable;
  if (durable && ::fsync(fd_.get()) != 0) return io_error(errno_text(errno, "syncing", tmp_));
  if (::close(fd_.release()) != 0) return io_error(errno_text(errno, "closing", tmp_));
  if (::rename(tmp_.c_str(), path.c_str()) != 0)
    return io_error(errno_text(errno, "renaming into", path));
  committed_ = true;
  return durable ? fsync_dir(path.parent_path()) : Status{};
}

Result<PositionalFile> PositionalFile::open(const fs::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return io_error(errno_text(errno, "opening", path));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return io_error(errno_text(errno, "reading", path));
  if (!S_ISREG(st.st_mode)) return invalid_input(path.string() + " is not a regular file");
  return PositionalFile(path, std::move(fd), static_cast<std::uint64_t>(st.st_size));
}

Status PositionalFile::read(std::uint64_t offset, std::span<std::uint8_t> out) const {
  if (offset > size_ || out.size() > size_ - offset) {
    return invalid_input(path_.string() + ": " + std::to_string(out.size()) + " bytes at " +
                         std::to_string(offset) + " run past its " + std::to_string(size_) +
                         " bytes");
  }
  std::size_t done = 0;
  while (done < out.size()) {
    ssize_t n =
        ::pread(fd_.get(), out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(errno_text(errno, "reading", path_));
    }
    if (n == 0) return io_error(path_.string() + ": shorter than it was when opened");
    done += static_cast<std::size_t>(n);
  }
  return {};
}

}  // namespace vt

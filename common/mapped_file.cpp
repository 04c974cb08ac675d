#include "common/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/fd.h"
#include "common/sha256.h"

namespace vt {
namespace {

Error open_error(const std::filesystem::path& path) {
  return invalid_input(path.string() + ": cannot open (" + std::strerror(errno) + ")");
}

}  // namespace

Result<MappedFile> MappedFile::open(const std::filesystem::path& path) {
  // O_NONBLOCK: a FIFO named as a data file must be refused below, not block this open.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return open_error(path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return open_error(path);
  if (!S_ISREG(st.st_mode)) return invalid_input(path.string() + ": not a regular file");
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<std::size_t>(st.st_size);
  if (file.size_ == 0) return file;  // mmap of length 0 fails; an empty span is the honest view
  void* p = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (p == MAP_FAILED)
    return io_error(path.string() + ": mmap failed (" + std::strerror(errno) + ")");
  // Batches touch rows at random offsets: read-ahead of neighbours would mostly be wasted.
  ::madvise(p, file.size_, MADV_RANDOM);
  file.data_ = static_cast<const std::uint8_t*>(p);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(other.data_), size_(other.size_), path_(std::move(other.path_)) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
    data_ = other.data_;
    size_ = other.size_;
    path_ = std::move(other.path_);
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

Result<Digest> sha256_file(const std::filesystem::path& path) {
  // O_NONBLOCK: a FIFO named as a data file must be refused below, not block this open.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return open_error(path);
  Sha256 h;
  std::vector<std::uint8_t> buf(std::size_t{1} << 20);
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error(path.string() + ": read failed (" + std::strerror(errno) + ")");
    if (n == 0) break;
    h.update(ByteSpan(buf.data(), static_cast<std::size_t>(n)));
  }
  // The file was only streamed through: let the kernel drop its cached pages first.
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  return h.finish();
}

}  // namespace vt

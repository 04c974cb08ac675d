#include "common/folder.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <string>
#include <vector>

#include "common/file_io.h"

namespace vt {
namespace fs = std::filesystem;

Result<Folder> Folder::open(const fs::path& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return io_error(errno_text(errno, "opening folder", dir));
  return Folder(dir, std::move(fd));
}

Result<Fd> Folder::open_below(const fs::path& relative) const {
  const fs::path shown = path_ / relative;
  std::vector<std::string> names;
  for (const auto& part : relative) names.push_back(part.string());
  if (relative.is_absolute() || names.empty()) {
    return invalid_input(shown.string() + ": expected a path below " + path_.string());
  }
  Fd current(-1);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const bool last = i + 1 == names.size();
    if (names[i].empty() || names[i] == "." || names[i] == "..") {
      return invalid_input(shown.string() + ": expected a path below " + path_.string() +
                           " without '.' or '..'");
    }
    // O_NONBLOCK: opening a FIFO planted in the folder must not wait for a writer.
    const int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (last ? O_NONBLOCK : O_DIRECTORY);
    const int at = current.get() >= 0 ? current.get() : fd_.get();
    Fd next(::openat(at, names[i].c_str(), flags));
    if (next.get() < 0) {
      const int failed = errno;
      // O_NOFOLLOW refuses a link as ELOOP; with O_DIRECTORY Linux says ENOTDIR instead.
      struct stat st {};
      const bool link =
          failed == ELOOP ||
          (failed == ENOTDIR && ::fstatat(at, names[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           S_ISLNK(st.st_mode));
      if (link) {
        return io_error(shown.string() + ": " + (last ? "is" : "passes through") +
                        " a symbolic link; only regular files inside " + path_.string() +
                        " are read, links are not followed");
      }
      return io_error(errno_text(failed, "opening", shown));
    }
    current = std::move(next);
  }
  return current;
}

Result<Bytes> Folder::read(const fs::path& relative, std::uint64_t max_bytes) const {
  VT_ASSIGN_OR_RETURN(Fd fd, open_below(relative));
  return read_open_file(fd.get(), path_ / relative, max_bytes);
}

bool Folder::has_file(const fs::path& relative) const {
  auto fd = open_below(relative);
  struct stat st {};
  return fd.ok() && ::fstat(fd->get(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace vt

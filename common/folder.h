#pragma once
// An open folder whose files are read without following symbolic links. A path below it is
// walked one name at a time with openat(2) and O_NOFOLLOW, so a link anywhere on the way, or a
// "..", is refused instead of leading out of the folder; the folder itself is opened once, so
// what its own path names later changes nothing. For files served to peers (the provider's
// workdir), where a link planted in the folder must not hand out a file from elsewhere.

#include <filesystem>

#include "common/bytes.h"
#include "common/fd.h"

namespace vt {

class Folder {
 public:
  static Result<Folder> open(const std::filesystem::path& dir);

  // The regular file at `relative`; one larger than `max_bytes` is refused before allocating.
  Result<Bytes> read(const std::filesystem::path& relative, std::uint64_t max_bytes) const;
  // Whether `relative`, reached the same way, is a regular file.
  bool has_file(const std::filesystem::path& relative) const;

  const std::filesystem::path& path() const { return path_; }

 private:
  Folder(std::filesystem::path path, Fd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  Result<Fd> open_below(const std::filesystem::path& relative) const;

  std::filesystem::path path_;
  Fd fd_;
};

}  // namespace vt

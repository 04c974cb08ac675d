#pragma once
// Read-only memory maps for data files that may be larger than memory (datasets): pages are
// read on first touch and may be dropped again by the kernel, so a 2 GB token file costs the
// pages a batch touches, not 2 GB of RSS. The bytes are the requestor's or provider's input:
// callers bound every offset against size() before they read.

#include <filesystem>

#include "common/bytes.h"

namespace vt {

class MappedFile {
 public:
  // A missing or unreadable file is invalid input naming the path.
  static Result<MappedFile> open(const std::filesystem::path& path);
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  ByteSpan bytes() const { return {data_, size_}; }
  std::uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  std::filesystem::path path_;
};

// SHA-256 of a file read in chunks with read(2), never mapped or held whole: hashing a pinned
// data file must not fill the process's RSS with it.
Result<Digest> sha256_file(const std::filesystem::path& path);

}  // namespace vt

#pragma once
// Files written and read a piece at a time, for states too large to hold twice in memory.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <span>

#include "common/bytes.h"
#include "common/fd.h"
#include "common/result.h"

namespace vt {

// A file built in pieces under a temporary name beside where it will go (NAME.tmp.PID.N, which
// sweep_temp_files recognises), and put in place whole by commit: fsync, rename, fsync of the
// folder. Until then nothing under the final name changes; a writer dropped uncommitted
// removes its temporary file.
class StreamFileWriter {
 public:
  // `stem`: the temporary file's name before ".tmp.PID.N", in `dir`.
  static Result<StreamFileWriter> create(const std::filesystem::path& dir, const std::string& stem);
  StreamFileWriter(StreamFileWriter&& other) noexcept;
  StreamFileWriter& operator=(StreamFileWriter&&) = delete;
  StreamFileWriter(const StreamFileWriter&) = delete;
  ~StreamFileWriter();

  Status append(ByteSpan bytes);
  Status write_at(std::uint64_t offset, ByteSpan bytes);  // within what was appended
  std::uint64_t size() const { return size_; }
  // Puts the file in place as `path` (replacing what was there), durable: fsync'd before and
  // after the rename. kScratch skips the fsyncs, for a file that lives only while its process
  // runs (a verifier's replayed state): no reader after a crash, so nothing to make durable.
  enum class Durability { kDurable, kScratch };
  Status commit(const std::filesystem::path& path, Durability durability = Durability::kDurable);

 private:
  StreamFileWriter(std::filesystem::path tmp, Fd fd) : tmp_(std::move(tmp)), fd_(std::move(fd)) {}
  std::filesystem::path tmp_;
  Fd fd_;
  std::uint64_t size_ = 0;
  bool committed_ = false;
};

// Reads at offsets from a file opened once; safe to call from several threads at once.
class PositionalFile {
 public:
  static Result<PositionalFile> open(const std::filesystem::path& path);
  std::uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }
  // Exactly out.size() bytes at `offset`, or an error naming the file.
  Status read(std::uint64_t offset, std::span<std::uint8_t> out) const;

 private:
  PositionalFile(std::filesystem::path path, Fd fd, std::uint64_t size)
      : path_(std::move(path)), fd_(std::move(fd)), size_(size) {}
  std::filesystem::path path_;
  Fd fd_;
  std::uint64_t size_ = 0;
};

}  // namespace vt

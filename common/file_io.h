#pragma once
// File access with the durability rules every stored artifact follows: a file is either absent
// or complete. Writes go to a temp file in the same folder, are fsync'd, renamed over the target
// and the folder is fsync'd, so a crash never leaves a half-written file under the real name.

#include <sys/types.h>

#include <filesystem>
#include <string_view>

#include "common/bytes.h"

namespace vt {

// A file the caller names as its own input (a task, a verdict, evidence): one that does not exist,
// or is a folder, is the caller's mistake (Errc::kInvalidInput, exit 2) naming `what` and the
// path; files that exist but cannot be read stay I/O errors, found by the read itself.
Status check_input_file(const std::filesystem::path& path, std::string_view what);

// Reads a whole file; refuses files larger than `max_bytes` before allocating.
Result<Bytes> read_file(const std::filesystem::path& path,
                        std::uint64_t max_bytes = std::uint64_t{1} << 40);
// The first `max_bytes` bytes of a file (all of it when it is shorter): a bounded look at the
// start of a file that may be large.
Result<Bytes> read_file_head(const std::filesystem::path& path, std::uint64_t max_bytes);
// read_file for a file open as `fd` (named `path` in errors), read from its current offset.
Result<Bytes> read_open_file(int fd, const std::filesystem::path& path, std::uint64_t max_bytes);
Result<std::string> read_text_file(const std::filesystem::path& path,
                                   std::uint64_t max_bytes = std::uint64_t{64} << 20);

// read_text_file for a secret (a token, a private key): refused while the file is open to the
// group or others, with the chmod that fixes it, so a leaked secret is noticed before it is used.
Result<std::string> read_secret_file(const std::filesystem::path& path,
                                     std::uint64_t max_bytes = std::uint64_t{1} << 20);
// The same check without reading, for files another library opens (OpenSSL's TLS key).
Status check_secret_file(const std::filesystem::path& path);

enum class Overwrite { kAllow, kRefuse };

// Atomically replaces (or, with kRefuse, creates) `path` with `bytes`, created with `mode`.
Status write_file_atomic(const std::filesystem::path& path, ByteSpan bytes, mode_t mode = 0644,
                         Overwrite overwrite = Overwrite::kAllow);
inline Status write_file_atomic(const std::filesystem::path& path, std::string_view text,
                                mode_t mode = 0644, Overwrite overwrite = Overwrite::kAllow) {
  return write_file_atomic(path, as_bytes(text), mode, overwrite);
}

// Removes the temp files that write_file_atomic left in `dir` when its process was killed
// mid-write (NAME.tmp.PID.N of a PID that no longer runs); returns how many. Call it where a
// writer resumes, under the folder's lock.
std::size_t sweep_temp_files(const std::filesystem::path& dir);

// Appends `bytes` to `path` (created if absent) and fsyncs it before returning.
Status append_durable(const std::filesystem::path& path, ByteSpan bytes);

// fsyncs a folder so that a rename or create inside it survives a crash.
Status fsync_dir(const std::filesystem::path& dir);

// "No space left on device (writing X)" style text for an errno value.
std::string errno_text(int err, std::string_view action, const std::filesystem::path& path);

}  // namespace vt

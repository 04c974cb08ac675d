#pragma once
// Where a verifier keeps states too large to hold twice in memory: a private scratch folder,
// and a canonical state in one of its files, read a piece at a time. A replayed state waits
// there to be judged (only the fingerprint's positions are read back in exact mode), the state a
// later challenge starts from waits there instead of in memory, and the replay workers' states
// travel through it (docs/verifier.md, "Memory").

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include "common/bytes.h"
#include "common/safetensors.h"
#include "common/stream_file.h"
#include "fingerprint/fingerprint.h"

namespace vt::verifier {

// TMPDIR/veritrain-replay-PID-XXXXXX, removed with everything in it when the last holder lets
// go. Creating one first removes the folders of verifiers that were killed outright (their
// process is gone), since the states in them can be large. Files in it are written whole but
// not fsync'd: they live only while this verifier runs.
class ScratchFolder {
 public:
  static Result<std::shared_ptr<ScratchFolder>> create();
  ~ScratchFolder();
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // A name in the folder no other call returned: `stem`-N`suffix`.
  std::filesystem::path fresh_name(const std::string& stem, const std::string& suffix);
  Status write(const std::filesystem::path& file, ByteSpan bytes) const;

 private:
  explicit ScratchFolder(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
  std::atomic<std::uint64_t> next_{0};
};

// A canonical state this verifier wrote into its scratch folder, with the Merkle root it
// computed while writing it. The file is removed when the last holder lets go; the folder lives
// at least as long.
class StateFile {
 public:
  // Takes over `file` (in `folder`), whose root is `root`; its header is read and checked.
  static Result<std::shared_ptr<const StateFile>> adopt(std::shared_ptr<ScratchFolder> folder,
                                                        const std::filesystem::path& file,
                                                        const Digest& root);
  ~StateFile();
  StateFile(const StateFile&) = delete;
  StateFile& operator=(const StateFile&) = delete;

  const Digest& root() const { return root_; }
  std::uint64_t size() const { return file_.size(); }
  // The tensor list; offsets relative to data_start().
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  std::uint64_t data_start() const { return data_start_; }
  Status read(std::uint64_t offset, std::span<std::uint8_t> out) const {
    return file_.read(offset, out);
  }
  Result<Bytes> read_all() const;
  // The values at `plan`'s positions, read from the file: a few bytes each, not the state.
  Result<fp::Fingerprint> gather(const fp::SamplePlan& plan) const;

 private:
  StateFile(std::shared_ptr<ScratchFolder> folder, PositionalFile file, const Digest& root)
      : folder_(std::move(folder)), file_(std::move(file)), root_(root) {}
  std::shared_ptr<ScratchFolder> folder_;
  PositionalFile file_;
  Digest root_{};
  std::vector<TensorEntry> tensors_;
  std::uint64_t data_start_ = 0;
};

}  // namespace vt::verifier

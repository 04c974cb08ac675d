#pragma once
// `veritrain log verify` and `inspect` on a workdir: signatures, chain, task binding, and that
// every committed snapshot is stored and decodes to its committed root.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/bytes.h"

namespace vt::provider {

struct EpochStatus {
  std::uint64_t epoch = 0;
  Digest root{};
  std::string file;   // relative to the workdir
  std::string codec;  // of the stored container; empty if missing
  std::uint64_t stored_bytes = 0;
  std::string problem;  // empty when the snapshot checks out
};

struct WorkdirReport {
  Digest task_id{};
  std::uint64_t records = 0;
  Digest head{};
  std::string signer_fingerprint;
  std::vector<EpochStatus> epochs;
  std::uint64_t disk_bytes = 0;
  std::string torn_tail;  // a crash's partial last line, if any (recovered on the next train)
};

// Checks the whole workdir. A tampered or incomplete workdir is Errc::kRejected with the first
// problem named (epoch, file, what is wrong); a folder that is no workdir is kInvalidInput.
// With decode_snapshots false only presence and headers of containers are checked.
Result<WorkdirReport> check_workdir(const std::filesystem::path& dir, bool decode_snapshots = true);

}  // namespace vt::provider

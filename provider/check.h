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

// Checks the whole workdir. A log that does not check out (signatures, chain, task binding) is
// Errc::kRejected naming the epoch; every committed snapshot that is missing, damaged or does
// not decode to its root is a finding in its EpochStatus::problem, all of them, not only the
// first (a delta whose base is damaged fails with it). A folder that is no workdir is
// kInvalidInput. With decode_snapshots false only presence and headers of containers are checked.
Result<WorkdirReport> check_workdir(const std::filesystem::path& dir, bool decode_snapshots = true);

// "epoch 5: snapshots/818d....vtc: <what is wrong>", one per unusable snapshot, in epoch order.
std::vector<std::string> unusable_snapshots(const WorkdirReport& report);

}  // namespace vt::provider

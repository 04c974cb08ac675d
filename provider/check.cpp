#include "provider/check.h"

#include "common/file_io.h"
#include "protocol/log.h"
#include "provider/workdir/store.h"
#include "provider/workdir/workdir.h"

namespace vt::provider {
namespace fs = std::filesystem;

std::vector<std::string> unusable_snapshots(const WorkdirReport& report) {
  std::vector<std::string> out;
  for (const EpochStatus& e : report.epochs) {
    if (!e.problem.empty())
      out.push_back("epoch " + std::to_string(e.epoch) + ": " + e.file + ": " + e.problem);
  }
  return out;
}

Result<WorkdirReport> check_workdir(const fs::path& dir, bool decode_snapshots) {
  VT_ASSIGN_OR_RETURN(Workdir w, Workdir::open_existing(dir));
  WorkdirReport report;
  report.task_id = w.task_id();
  if (!fs::exists(w.log_file())) return report;  // created, nothing committed yet

  auto log = read_log(w.log_file());
  if (!log) return rejected(log.error().message);
  if (log->torn_tail) {
    report.torn_tail = "a partial record of " + std::to_string(log->torn_tail->size) +
                       " bytes at offset " + std::to_string(log->torn_tail->offset) +
                       " (a crash during epoch " + std::to_string(log->torn_tail->epoch) +
                       "'s append; `train` recovers it)";
  }
  if (!log->records.empty() && log->records.front().record.task_id != w.task_id()) {
    return rejected(w.log_file().string() + ": the log commits to task " +
                    hex_encode(log->records.front().record.task_id) + ", but task.json hashes to " +
                    hex_encode(w.task_id()) + " (task.json or the log was changed)");
  }
  auto checked = verify_log(log->records, w.task_id(), std::nullopt, w.log_file().string());
  if (!checked) return rejected(checked.error().message);
  report.records = checked->records;
  report.head = checked->head;
  report.signer_fingerprint = checked->signer_fingerprint;

  SnapshotStore store(w.snapshots_dir(), {});
  // Epochs in order: each delta decodes against the epoch just decoded, not its chain again.
  std::optional<std::pair<Digest, Bytes>> previous;
  for (const SignedRecord& r : log->records) {
    EpochStatus s;
    s.epoch = r.record.epoch;
    s.root = r.record.root;
    s.file = fs::relative(store.path_for(s.root), dir).string();
    auto container = store.load_container(s.root);
    if (!container) {
      s.problem = "snapshot file is missing";
    } else {
      s.stored_bytes = container->size();
      auto info = comp::read_container_info(*container);
      if (!info) {
        s.problem = info.error().message;
      } else {
        s.codec = std::string(comp::codec_name(info->codec));
        if (info->root != s.root) s.problem = "container holds root " + hex_encode(info->root);
      }
      if (s.problem.empty() && decode_snapshots) {
        SnapshotStore::KnownBase known;
        if (previous) known = std::make_pair(previous->first, ByteSpan(previous->second));
        auto decoded = store.decode(s.root, *container, known);
        if (decoded) {
          previous = std::make_pair(s.root, std::move(*decoded));
        } else {
          s.problem = decoded.error().message;
          previous.reset();
        }
      }
    }
    report.epochs.push_back(std::move(s));
  }
  report.disk_bytes = store.disk_usage();
  return report;
}

}  // namespace vt::provider

#include "provider/workdir/workdir.h"

#include <algorithm>

#include "common/activity.h"
#include "common/file_io.h"
#include "provider/workdir/store.h"
#include "verifier/source/source.h"

namespace vt::verifier {
namespace {

// Reads a workdir in place. It takes no lock: a provider may still be appending, and the log
// reader ignores a torn tail.
class WorkdirSource final : public EvidenceSource {
 public:
  explicit WorkdirSource(provider::Workdir w)
      : workdir_(std::move(w)), store_(workdir_.snapshots_dir(), {1, 0, 64}) {}

  Result<std::string> task_json() override { return read_text_file(workdir_.task_file()); }

  // Offline the workdir is all the provider hands over: a file it lacks or that cannot be read
  // is evidence withheld, the provider's failure (docs/verifier.md, "Exit codes").
  Result<std::vector<SignedRecord>> log() override {
    VT_RETURN_IF_ERROR(check_limited());
    const Activity reading("reading the commitment log of workdir " + workdir_.dir().string());
    // A file longer than the task's records can take is not read; what is read is held to the
    // same checks as a log read over the network, so that both stop at the same record.
    const LogBounds& bounds = limits_.log;
    const std::uint64_t most = (std::uint64_t{1} << 40) / bounds.record_bytes;
    auto file =
        read_log(workdir_.log_file(), bounds.records > most ? std::uint64_t{1} << 40
                                                            : bounds.records * bounds.record_bytes);
    if (!file) return withheld(file.error(), "the commitment log");
    LogStreamCheck check(bounds);
    const std::string where = workdir_.log_file().string();
    for (const SignedRecord& r : file->records) {
      VT_RETURN_IF_ERROR(check.admit(encode_record(r).size(), where));
      VT_RETURN_IF_ERROR(check.accept(r, where));
    }
    return std::move(file->records);
  }

  Result<std::optional<SignedRecord>> first_record() override {
    VT_RETURN_IF_ERROR(check_limited());
    auto head = read_file_head(workdir_.log_file(), limits_.log.record_bytes);
    if (!head) return withheld(head.error(), "the commitment log");
    const std::string where = workdir_.log_file().string() + ": " + log_position(0);
    const auto newline = std::find(head->begin(), head->end(), '\n');
    if (newline == head->end()) {
      if (head->size() < limits_.log.record_bytes) return std::optional<SignedRecord>();  // torn
      return rejected(where + ": no record within the " + std::to_string(limits_.log.record_bytes) +
                      " bytes a record of this task "
                      "can take");
    }
    VT_ASSIGN_OR_RETURN(
        SignedRecord first,
        decode_record(ByteSpan(*head).first(static_cast<std::size_t>(newline - head->begin() + 1)),
                      where));
    first.line = 1;
    return std::optional<SignedRecord>(std::move(first));
  }

  Result<Bytes> snapshot(std::uint64_t epoch, const Digest& root,
                         const std::optional<std::pair<Digest, ByteSpan>>&) override {
    const Activity reading("reading the epoch " + std::to_string(epoch) + " snapshot of workdir " +
                           workdir_.dir().string());
    auto bytes = store_.load_canonical(root);  // follows delta bases, checks every root
    if (!bytes) return withheld(bytes.error(), "epoch " + std::to_string(epoch) + " snapshot");
    std::error_code ec;
    fetched_ +=
        std::filesystem::file_size(store_.path_for(root), ec);  // what a transfer would move
    return bytes;
  }

  void set_limits(const SourceLimits& limits) override {
    limits_ = limits;
    limited_ = true;
    store_.set_max_state_bytes(limits.snapshot_bytes);
  }
  std::uint64_t bytes_fetched() const override { return fetched_; }
  std::string describe() const override { return "workdir " + workdir_.dir().string(); }

 private:
  static Error withheld(const Error& e, const std::string& what) {
    if (e.code != Errc::kIo) return e.context(what);
    return rejected(what + " is withheld: the workdir does not provide it (" + e.message + ")");
  }

  Status check_limited() const {
    if (limited_) return {};
    return internal_error("the log of workdir " + workdir_.dir().string() +
                          " was asked for before the task bounded it");
  }

  provider::Workdir workdir_;
  provider::SnapshotStore store_;
  SourceLimits limits_;
  bool limited_ = false;
  std::uint64_t fetched_ = 0;
};

}  // namespace

bool signed_by(const std::vector<SignedRecord>& records, const std::string& key) {
  if (records.empty()) return false;
  auto checked = verify_log(records, records.front().record.task_id);
  return checked && checked->signer_fingerprint == key;
}

Status check_workdir_task(EvidenceSource& workdir, const Task& task,
                          const std::filesystem::path& where,
                          const std::optional<std::string>& provider_key) {
  Result<std::string> text = workdir.task_json();
  if (!text) return {};
  Result<Task> theirs = parse_task(*text, (where / "task.json").string());
  if (!theirs) return {};
  const std::string ours = hex_encode(task_id(task)), its = hex_encode(task_id(*theirs));
  if (ours == its) return {};
  if (provider_key) {
    auto records = workdir.log();
    if (records && signed_by(*records, *provider_key)) return {};
  }
  return invalid_input("--workdir " + where.string() + " holds task " + its.substr(0, 16) +
                       "... (its task.json), not the task of --task (" + ours.substr(0, 16) +
                       "...): check that the two belong together" +
                       (provider_key ? ""
                                     : " (with --provider-key, a log the provider signed "
                                       "for another task is judged: rejected)"));
}

Result<std::unique_ptr<EvidenceSource>> open_workdir_source(const std::filesystem::path& workdir) {
  VT_ASSIGN_OR_RETURN(provider::Workdir w, provider::Workdir::layout_of(workdir));
  return std::unique_ptr<EvidenceSource>(std::make_unique<WorkdirSource>(std::move(w)));
}

}  // namespace vt::verifier

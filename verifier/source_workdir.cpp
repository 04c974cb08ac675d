#include "common/file_io.h"
#include "provider/workdir/store.h"
#include "provider/workdir/workdir.h"
#include "verifier/source.h"

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
    // Records past what the task allows are a failure anyway; a bigger file is not read.
    const std::uint64_t max_bytes = limits_.log_records > (std::uint64_t{1} << 40) / kMaxRecordBytes
                                        ? std::uint64_t{1} << 40
                                        : limits_.log_records * kMaxRecordBytes;
    auto file = read_log(workdir_.log_file(), max_bytes);
    if (!file) return withheld(file.error(), "the commitment log");
    return std::move(file->records);
  }

  Result<Bytes> snapshot(std::uint64_t epoch, const Digest& root,
                         const std::optional<std::pair<Digest, ByteSpan>>&) override {
    auto bytes = store_.load_canonical(root);  // follows delta bases, checks every root
    if (!bytes) return withheld(bytes.error(), "epoch " + std::to_string(epoch) + " snapshot");
    std::error_code ec;
    fetched_ +=
        std::filesystem::file_size(store_.path_for(root), ec);  // what a transfer would move
    return bytes;
  }

  void set_limits(const SourceLimits& limits) override {
    limits_ = limits;
    store_.set_max_state_bytes(limits.snapshot_bytes);
  }
  std::uint64_t bytes_fetched() const override { return fetched_; }
  std::string describe() const override { return "workdir " + workdir_.dir().string(); }

 private:
  static Error withheld(const Error& e, const std::string& what) {
    if (e.code != Errc::kIo) return e.context(what);
    return rejected(what + " is withheld: the workdir does not provide it (" + e.message + ")");
  }

  provider::Workdir workdir_;
  provider::SnapshotStore store_;
  SourceLimits limits_;
  std::uint64_t fetched_ = 0;
};

}  // namespace

Status check_workdir_task(EvidenceSource& workdir, const Task& task,
                          const std::filesystem::path& where) {
  Result<std::string> text = workdir.task_json();
  if (!text) return {};
  Result<Task> theirs = parse_task(*text, (where / "task.json").string());
  if (!theirs) return {};
  const std::string ours = hex_encode(task_id(task)), its = hex_encode(task_id(*theirs));
  if (ours == its) return {};
  return invalid_input("--workdir " + where.string() + " holds task " + its.substr(0, 16) +
                       "... (its task.json), not the task of --task (" + ours.substr(0, 16) +
                       "...): check that the two belong together");
}

Result<std::unique_ptr<EvidenceSource>> open_workdir_source(const std::filesystem::path& workdir) {
  VT_ASSIGN_OR_RETURN(provider::Workdir w, provider::Workdir::layout_of(workdir));
  return std::unique_ptr<EvidenceSource>(std::make_unique<WorkdirSource>(std::move(w)));
}

}  // namespace vt::verifier

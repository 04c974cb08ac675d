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
  explicit WorkdirSource(provider::Workdir w) : workdir_(std::move(w)), store_(workdir_.snapshots_dir(), {1, 0, 64}) {}

  Result<std::string> task_json() override { return read_text_file(workdir_.task_file()); }

  Result<std::vector<SignedRecord>> log() override {
    VT_ASSIGN_OR_RETURN(LogFile file, read_log(workdir_.log_file()));
    return std::move(file.records);
  }

  Result<Bytes> snapshot(std::uint64_t epoch, const Digest& root,
                         const std::optional<std::pair<Digest, ByteSpan>>&) override {
    auto bytes = store_.load_canonical(root);  // follows delta bases, checks every root
    if (!bytes) return bytes.error().context("epoch " + std::to_string(epoch) + " snapshot");
    std::error_code ec;
    fetched_ += std::filesystem::file_size(store_.path_for(root), ec);  // what a transfer would move
    return bytes;
  }

  std::uint64_t bytes_fetched() const override { return fetched_; }
  std::string describe() const override { return "workdir " + workdir_.dir().string(); }

 private:
  provider::Workdir workdir_;
  provider::SnapshotStore store_;
  std::uint64_t fetched_ = 0;
};

}  // namespace

Result<std::unique_ptr<EvidenceSource>> open_workdir_source(const std::filesystem::path& workdir) {
  VT_ASSIGN_OR_RETURN(provider::Workdir w, provider::Workdir::open_existing(workdir));
  return std::unique_ptr<EvidenceSource>(std::make_unique<WorkdirSource>(std::move(w)));
}

}  // namespace vt::verifier

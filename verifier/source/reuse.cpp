#include "verifier/check/scratch.h"
#include "verifier/source/source.h"

namespace vt::verifier {
namespace {

// Challenged epochs are often neighbours: the state after epoch e is the state before e+1, and
// the final model is the state after the last epoch. This source hands out the last snapshot it
// returned again instead of fetching it a second time. It only ever holds bytes the inner source
// already checked against their committed root, so a hit is as trustworthy as a fetch.
class ReuseLastSnapshot final : public EvidenceSource {
 public:
  ReuseLastSnapshot(EvidenceSource& inner, std::shared_ptr<ScratchFolder> scratch,
                    std::uint64_t on_disk_from)
      : inner_(inner), scratch_(std::move(scratch)), on_disk_from_(on_disk_from) {}

  Result<std::string> task_json() override { return inner_.task_json(); }
  Result<std::vector<SignedRecord>> log() override { return inner_.log(); }
  Result<std::optional<SignedRecord>> first_record() override { return inner_.first_record(); }

  Result<Bytes> snapshot(std::uint64_t epoch, const Digest& root,
                         const std::optional<std::pair<Digest, ByteSpan>>& base) override {
    if (in_memory_ && in_memory_->first == root) return in_memory_->second;
    if (on_disk_ && on_disk_->root() == root) return on_disk_->read_all();
    forget();
    VT_ASSIGN_OR_RETURN(Bytes bytes, inner_.snapshot(epoch, root, base));
    if (scratch_ && bytes.size() >= on_disk_from_) {
      // A full disk only costs the reuse: the next request fetches again.
      const auto file =
          scratch_->fresh_name("fetched-epoch-" + std::to_string(epoch), ".safetensors");
      if (scratch_->write(file, bytes)) {
        if (auto kept = StateFile::adopt(scratch_, file, root)) on_disk_ = std::move(*kept);
      } else {
        std::error_code ignored;
        std::filesystem::remove(file, ignored);
      }
    } else {
      in_memory_.emplace(root, bytes);
    }
    return bytes;
  }

  void set_limits(const SourceLimits& limits) override { inner_.set_limits(limits); }
  std::uint64_t bytes_fetched() const override { return inner_.bytes_fetched(); }
  std::string describe() const override { return inner_.describe(); }
  Status follow(std::uint64_t from, const std::function<bool(const SignedRecord&)>& on_commit,
                std::chrono::milliseconds wait) override {
    return inner_.follow(from, on_commit, wait);
  }

 private:
  void forget() {
    in_memory_.reset();
    on_disk_.reset();
  }

  EvidenceSource& inner_;
  std::shared_ptr<ScratchFolder> scratch_;
  std::uint64_t on_disk_from_;
  std::optional<std::pair<Digest, Bytes>> in_memory_;
  std::shared_ptr<const StateFile> on_disk_;
};

}  // namespace

SourceLimits limits_for(const Task& task) {
  SourceLimits limits;
  limits.log = LogBounds(static_cast<std::uint64_t>(task.epochs) + 1, kMaxRecordBytes);
  return limits;
}

Result<std::optional<SignedRecord>> EvidenceSource::first_record() {
  VT_ASSIGN_OR_RETURN(std::vector<SignedRecord> records, log());
  if (records.empty()) return std::optional<SignedRecord>();
  return std::optional<SignedRecord>(std::move(records.front()));
}

std::unique_ptr<EvidenceSource> reuse_last_snapshot(EvidenceSource& inner,
                                                    std::shared_ptr<ScratchFolder> scratch,
                                                    std::uint64_t on_disk_from) {
  return std::make_unique<ReuseLastSnapshot>(inner, std::move(scratch), on_disk_from);
}

}  // namespace vt::verifier

#include "protocol/net/client.h"
#include "verifier/source.h"

namespace vt::verifier {
namespace {

class ProviderSource final : public EvidenceSource {
 public:
  ProviderSource(Client client, ClientConfig config, std::string where)
      : client_(std::move(client)), config_(std::move(config)), where_(std::move(where)) {}

  // A subscription occupies its connection, and the checks made while it runs fetch snapshots:
  // so it gets a second connection of its own.
  Status follow(std::uint64_t from, const std::function<bool(const SignedRecord&)>& on_commit,
                std::chrono::milliseconds wait) override {
    auto watcher = Client::connect(config_);
    if (!watcher) return watcher.error().context("subscribing to " + where_);
    return watcher->subscribe(from, on_commit, wait);
  }

  Result<std::string> task_json() override {
    VT_ASSIGN_OR_RETURN(Bytes task, client_.get_task());
    return std::string(task.begin(), task.end());
  }

  Result<std::vector<SignedRecord>> log() override { return client_.get_log(0); }

  Result<Bytes> snapshot(std::uint64_t epoch, const Digest& root,
                         const std::optional<std::pair<Digest, ByteSpan>>& base) override {
    SnapshotRequest request;
    request.epoch = epoch;
    request.root = root;
    if (base) {
      request.codec = comp::Codec::kDelta;
      request.base = base->second;
      request.base_root = base->first;
    }
    std::uint64_t size = 0;
    auto bytes = client_.get_snapshot(request, [&](const SnapshotProgress& p) {
      size = p.total;
      return true;
    });
    fetched_ += size;
    if (!bytes) return bytes.error().context("epoch " + std::to_string(epoch) + " snapshot from " + where_);
    return bytes;
  }

  std::uint64_t bytes_fetched() const override { return fetched_; }
  std::string describe() const override { return "provider " + where_; }

 private:
  Client client_;
  ClientConfig config_;
  std::string where_;
  std::uint64_t fetched_ = 0;
};

}  // namespace

Result<std::unique_ptr<EvidenceSource>> open_provider_source(const ClientConfig& config) {
  const std::string where = config.host + ":" + std::to_string(config.port);
  auto client = Client::connect(config);
  if (!client) return client.error().context("connecting to " + where);
  return std::unique_ptr<EvidenceSource>(std::make_unique<ProviderSource>(std::move(*client), config, where));
}

}  // namespace vt::verifier

#pragma once
// A Catalog held in memory with real data: canonical safetensors snapshots that change a little
// per epoch (so deltas pay), a signed hash-chained log over their Merkle roots, and containers
// made by compression/. A storage fixture for the server tests, not a stand-in for the protocol.

#include <map>
#include <mutex>
#include <tuple>

#include "common/safetensors.h"
#include "common/sha256.h"
#include "fingerprint/merkle.h"
#include "protocol/net/catalog.h"
#include "protocol/task.h"

namespace vt::testing {

class MemoryCatalog : public Catalog {
 public:
  // `floats` F32 values per snapshot (4 bytes each; 1 MiB = 262144 values).
  explicit MemoryCatalog(std::size_t floats) : floats_(floats), key_(*SigningKey::generate()) {
    Task task;
    task.model.name = "mlp";
    task.dataset.name = "synthetic";
    std::string json = canonical_task_json(task);
    task_bytes_ = Bytes(json.begin(), json.end());
    task_id_ = vt::task_id(task);
  }

  // Commits the next epoch: a snapshot whose weights drift from the previous one.
  void add_epoch() {
    std::lock_guard lock(mutex_);
    std::uint64_t epoch = records_.size();
    std::vector<float> weights(floats_);
    std::vector<float> bias(64);
    std::uint64_t x = 0x9E3779B97F4A7C15ull;
    for (std::size_t i = 0; i < floats_; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      float base = static_cast<float>(static_cast<double>(x % 20000) / 10000.0 - 1.0);
      // Each epoch moves every 16th weight: the rest are unchanged, which deltas exploit.
      weights[i] = base + (i % 16 == 0 ? 0.001f * static_cast<float>(epoch) : 0.0f);
    }
    for (std::size_t i = 0; i < bias.size(); ++i)
      bias[i] = static_cast<float>(epoch) + 0.5f * static_cast<float>(i);
    std::vector<TensorData> tensors = {
        {{"fc.weight", DType::kF32, {static_cast<std::int64_t>(floats_)}},
         ByteSpan(reinterpret_cast<const std::uint8_t*>(weights.data()), weights.size() * 4)},
        {{"fc.bias", DType::kF32, {64}},
         ByteSpan(reinterpret_cast<const std::uint8_t*>(bias.data()), bias.size() * 4)}};
    auto canonical = std::make_shared<const Bytes>(
        *write_canonical(tensors, {{"epoch", std::to_string(epoch)}}));
    CommitRecord record;
    record.task_id = task_id_;
    record.epoch = epoch;
    record.prev = records_.empty() ? Digest{} : records_.back().hash;
    record.root = fp::merkle_root(*canonical);
    record.fingerprint = nlohmann::json{{"k", 1}, {"values", {weights[0]}}};
    record.tracking_fingerprint = nlohmann::json{{"values", nlohmann::json::array()}};
    record.data_order_digest = sha256("order " + std::to_string(epoch));
    record.metrics = {
        .loss = 0.5, .steps = 10, .seconds = 1.0, .samples = 320, .eval = std::nullopt};
    record.time = utc_now_iso8601();
    records_.push_back(*sign_record(record, key_));
    snapshots_.push_back(canonical);
  }

  Digest root(std::uint64_t epoch) const {
    std::lock_guard lock(mutex_);
    return records_.at(epoch).record.root;
  }
  std::shared_ptr<const Bytes> snapshot(std::uint64_t epoch) const {
    std::lock_guard lock(mutex_);
    return snapshots_.at(epoch);
  }
  const Digest& task_id() const { return task_id_; }
  const Bytes& task_bytes() const { return task_bytes_; }
  PublicKey signer() const { return key_.public_key(); }
  // From now on, containers are coded at this zstd level: the same snapshots, other bytes (what
  // a provider that re-codes its store looks like to a client resuming a download).
  void recode_at_level(int level) {
    std::lock_guard lock(mutex_);
    level_ = level;
    cache_.clear();
  }

  int containers_built() const {
    std::lock_guard lock(mutex_);
    return built_;
  }

  Result<Bytes> task() override { return task_bytes_; }

  Result<std::vector<SignedRecord>> log_records(std::uint64_t from_epoch) override {
    std::lock_guard lock(mutex_);
    if (from_epoch >= records_.size()) return std::vector<SignedRecord>{};
    return std::vector<SignedRecord>(records_.begin() + static_cast<std::ptrdiff_t>(from_epoch),
                                     records_.end());
  }

  Result<std::shared_ptr<const Bytes>> canonical_snapshot(std::uint64_t epoch) override {
    std::lock_guard lock(mutex_);
    if (epoch >= snapshots_.size())
      return invalid_input("epoch " + std::to_string(epoch) + " is not committed");
    return snapshots_[epoch];
  }

  Result<std::shared_ptr<const Bytes>> container(const ContainerRequest& request) override {
    std::lock_guard lock(mutex_);
    if (request.epoch >= snapshots_.size())
      return invalid_input("epoch " + std::to_string(request.epoch) + " is not committed");
    std::optional<std::uint64_t> base;
    if (request.base_root)
      for (std::uint64_t e = 0; e < records_.size(); ++e)
        if (records_[e].record.root == *request.base_root) base = e;
    comp::Codec codec = base                                   ? comp::Codec::kDelta
                        : request.codec == comp::Codec::kDelta ? comp::Codec::kPlanes
                                                               : request.codec;
    auto key = std::make_tuple(request.epoch, codec, base.value_or(~0ull));
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    comp::EncodeOptions options;
    options.codec = codec;
    options.level = level_;
    options.root = records_[request.epoch].record.root;
    if (base) {
      options.base = *snapshots_[*base];
      options.base_root = records_[*base].record.root;
    }
    auto bytes = comp::encode(*snapshots_[request.epoch], options);
    if (!bytes.ok()) return bytes.error();
    ++built_;
    auto shared = std::make_shared<const Bytes>(std::move(*bytes));
    cache_[key] = shared;
    return shared;
  }

 private:
  std::size_t floats_;
  SigningKey key_;
  Bytes task_bytes_;
  Digest task_id_{};
  mutable std::mutex mutex_;
  std::vector<SignedRecord> records_;                    // GUARDED_BY(mutex_)
  std::vector<std::shared_ptr<const Bytes>> snapshots_;  // GUARDED_BY(mutex_)
  std::map<std::tuple<std::uint64_t, comp::Codec, std::uint64_t>, std::shared_ptr<const Bytes>>
      cache_;
  int level_ = 0;  // GUARDED_BY(mutex_)
  int built_ = 0;
};

}  // namespace vt::testing

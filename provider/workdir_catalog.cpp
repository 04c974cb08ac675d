#include "provider/workdir_catalog.h"

#include <future>
#include <list>
#include <map>
#include <mutex>

#include "common/folder.h"
#include "provider/workdir/store.h"
#include "provider/workdir/workdir.h"

namespace vt::provider {
namespace {

// Every file it serves is read below the workdir without following symbolic links
// (common/folder.h): a link planted in the workdir while it serves, task.json pointing at a
// file elsewhere say, is refused instead of handing that file to a peer.
class WorkdirCatalog final : public Catalog {
 public:
  WorkdirCatalog(Workdir w, std::shared_ptr<const Folder> folder, TraceAnswerer answer)
      : workdir_(std::move(w)),
        folder_(std::move(folder)),
        answer_(std::move(answer)),
        store_(folder_, workdir_.snapshots_dir().filename(), {1, 2, 64}) {}

  Result<Bytes> task() override {
    return folder_->read(workdir_.task_file().filename(), 64u << 20);
  }

  Result<std::vector<SignedRecord>> log_records(std::uint64_t from_epoch) override {
    const auto log = workdir_.log_file().filename();
    if (!folder_->has_file(log)) {
      // Not written yet (no epoch committed), unless something else stands there.
      if (!std::filesystem::exists(std::filesystem::symlink_status(workdir_.log_file())))
        return std::vector<SignedRecord>{};
    }
    // Re-read on every call: the trainer appends meanwhile, and a torn tail is simply not yet
    // durable, so it is left out.
    VT_ASSIGN_OR_RETURN(Bytes bytes, folder_->read(log, std::uint64_t{1} << 40));
    VT_ASSIGN_OR_RETURN(LogFile file, read_log(bytes, workdir_.log_file().string()));
    std::vector<SignedRecord> out;
    for (SignedRecord& r : file.records) {
      if (r.record.epoch >= from_epoch) out.push_back(std::move(r));
    }
    return out;
  }

  Result<std::shared_ptr<const Bytes>> canonical_snapshot(std::uint64_t epoch) override {
    VT_ASSIGN_OR_RETURN(Digest root, root_of(epoch));
    return unusable_if_bad(epoch, once(Key{root, std::nullopt}, canonical_, [&]() -> Result<Bytes> {
                             return store_.load_canonical(root);
                           }));
  }

  Result<std::shared_ptr<const Bytes>> container(const ContainerRequest& request) override {
    VT_ASSIGN_OR_RETURN(Digest root, root_of(request.epoch));
    return unusable_if_bad(request.epoch, coded_container(request, root));
  }

  Result<std::shared_ptr<const Bytes>> step_trace(const TraceRequest& request) override {
    if (!answer_) return Catalog::step_trace(request);
    // Only committed epochs: what the answer replays from is the state before it.
    if (auto committed = root_of(request.epoch); !committed) return committed.error();
    // One replay at a time: each is a whole process with LibTorch, and the server's slow-work
    // threads would otherwise run as many as it has.
    std::lock_guard lock(trace_mutex_);
    VT_ASSIGN_OR_RETURN(Bytes answer, answer_(request));
    return std::make_shared<const Bytes>(std::move(answer));
  }

 private:
  // A committed epoch whose stored state is missing or does not decode is the provider's own
  // failure, and the peer is told so as such (Errc::kRejected: the server's "unusable_state"),
  // not as a request for something that is not there. Its own I/O failures stay internal.
  // The store names containers by root when it serves; a message from below it (a file over
  // the size limit, say) may still hold the workdir's path, which a peer has no business with.
  Result<std::shared_ptr<const Bytes>> unusable_if_bad(std::uint64_t epoch,
                                                       Result<std::shared_ptr<const Bytes>> made) {
    if (made || made.error().code != Errc::kInvalidInput) return made;
    std::string why = made.error().message;
    const std::string local = folder_->path().string() + "/";
    for (std::size_t at; (at = why.find(local)) != std::string::npos;) why.erase(at, local.size());
    return rejected("the state stored for committed epoch " + std::to_string(epoch) +
                    " is unusable: " + why);
  }

  Result<std::shared_ptr<const Bytes>> coded_container(const ContainerRequest& request,
                                                       const Digest& root) {
    VT_ASSIGN_OR_RETURN(std::shared_ptr<const Bytes> stored, stored_container(root));
    VT_ASSIGN_OR_RETURN(comp::ContainerInfo info, comp::read_container_info(*stored));
    const bool usable =
        !info.base_root || (request.base_root && *request.base_root == *info.base_root);
    if (usable) return stored;
    // The stored delta needs a base the client lacks: code one it can use. A base the workdir
    // does not hold cannot be used, so it is not part of the key: a client sending made-up
    // base roots gets the one whole-snapshot container from the cache, not an encode each.
    const bool have_base = request.base_root && store_.contains(*request.base_root);
    const Key key{root, have_base ? request.base_root : std::nullopt};
    return once(key, coded_, [&]() -> Result<Bytes> {
      VT_ASSIGN_OR_RETURN(std::shared_ptr<const Bytes> canonical,
                          canonical_snapshot(request.epoch));
      comp::EncodeOptions enc;
      enc.root = root;
      // One thread per encode: the server runs at most slow_threads of them at once, beside
      // its I/O threads (protocol/net/catalog.h).
      enc.threads = 1;
      Bytes base;
      if (have_base) {
        VT_ASSIGN_OR_RETURN(base, store_.load_canonical(*request.base_root));
        enc.codec = comp::Codec::kDelta;
        enc.base = base;
        enc.base_root = request.base_root;
      }
      return comp::encode(*canonical, enc);
    });
  }

  Result<Digest> root_of(std::uint64_t epoch) {
    VT_ASSIGN_OR_RETURN(std::vector<SignedRecord> records, log_records(epoch));
    if (records.empty() || records.front().record.epoch != epoch) {
      return invalid_input("epoch " + std::to_string(epoch) + " is not committed (yet)");
    }
    return records.front().record.root;
  }

  // The stored container of `root`, read once however many connections stream it at the same
  // time: each holds the shared buffer while it streams, and the last one to finish frees it.
  Result<std::shared_ptr<const Bytes>> stored_container(const Digest& root) {
    std::lock_guard lock(load_mutex_);
    if (auto it = loaded_.find(root); it != loaded_.end()) {
      if (auto alive = it->second.lock()) return alive;
    }
    VT_ASSIGN_OR_RETURN(Bytes bytes, store_.load_container(root));
    auto shared = std::make_shared<const Bytes>(std::move(bytes));
    std::erase_if(loaded_, [](const auto& entry) { return entry.second.expired(); });
    loaded_[root] = shared;
    return shared;
  }

  // A snapshot (base empty) or a container of the snapshot `root` coded against `base`.
  using Key = std::pair<Digest, std::optional<Digest>>;
  using Made = Result<std::shared_ptr<const Bytes>>;

  // The few most recently used results, for a verifier that asks for one twice (a resume,
  // get_chunks after get_snapshot), and the ones being made now: a second request for the same
  // key waits for the first one's result instead of making it again.
  struct Cache {
    std::list<std::pair<Key, std::shared_ptr<const Bytes>>> recent;  // most recent first
    std::map<Key, std::shared_future<Made>> making;
  };

  template <typename Make>
  Made once(const Key& key, Cache& cache, Make&& make) {
    std::unique_lock lock(mutex_);
    for (auto it = cache.recent.begin(); it != cache.recent.end(); ++it) {
      if (it->first != key) continue;
      cache.recent.splice(cache.recent.begin(), cache.recent, it);
      return it->second;
    }
    if (auto it = cache.making.find(key); it != cache.making.end()) {
      std::shared_future<Made> pending = it->second;
      lock.unlock();
      return pending.get();
    }
    std::promise<Made> promise;
    cache.making.emplace(key, promise.get_future().share());
    lock.unlock();
    Made made = internal_error("not made");
    try {
      auto bytes = make();
      made = bytes.ok() ? Made(std::make_shared<const Bytes>(std::move(*bytes))) : bytes.error();
    } catch (...) {
      // Out of memory mid-encode, say: the waiters get the same exception, not a hang.
      lock.lock();
      cache.making.erase(key);
      lock.unlock();
      promise.set_exception(std::current_exception());
      throw;
    }
    lock.lock();
    cache.making.erase(key);
    if (made.ok()) {
      cache.recent.emplace_front(key, *made);
      if (cache.recent.size() > kCacheEntries) cache.recent.pop_back();
    }
    lock.unlock();
    promise.set_value(made);
    return made;
  }

  static constexpr std::size_t kCacheEntries = 4;
  Workdir workdir_;
  std::shared_ptr<const Folder> folder_;
  TraceAnswerer answer_;
  std::mutex trace_mutex_;
  SnapshotStore store_;
  std::mutex mutex_;
  std::mutex load_mutex_;  // held while a stored container is read, so it is read once
  std::map<Digest, std::weak_ptr<const Bytes>> loaded_;  // GUARDED_BY(load_mutex_)
  Cache canonical_;                                      // GUARDED_BY(mutex_)
  Cache coded_;                                          // GUARDED_BY(mutex_)
};

}  // namespace

Result<std::shared_ptr<Catalog>> open_workdir_catalog(const std::filesystem::path& workdir,
                                                      TraceAnswerer answer) {
  VT_ASSIGN_OR_RETURN(Workdir w, Workdir::open_existing(workdir));
  VT_ASSIGN_OR_RETURN(Folder folder, Folder::open(workdir));
  return std::shared_ptr<Catalog>(std::make_shared<WorkdirCatalog>(
      std::move(w), std::make_shared<const Folder>(std::move(folder)), std::move(answer)));
}

}  // namespace vt::provider

#pragma once
// Snapshot containers on disk, content-addressed by the Merkle root of their canonical bytes.
// A snapshot is stored whole (planes codec) or as a delta against the previous epoch's; a full
// one every `full_every` epochs bounds how many decodes a load takes.

#include <filesystem>
#include <memory>
#include <optional>

#include "common/folder.h"
#include "common/thread_pool.h"
#include "compression/container.h"
#include "compression/streaming.h"

namespace vt::provider {

struct StoreOptions {
  int full_every = 4;       // 1 = every snapshot whole
  std::size_t threads = 0;  // coding threads, the caller's included (0 = one per hardware thread)
  int max_chain = 64;       // a longer delta chain is refused as corrupt
  // The largest canonical snapshot a load may produce, and (with container_slack) the largest
  // container file it reads: checked before allocating, so a reader that knows the task's state
  // size (a verifier) refuses a huge or sparse file instead of running out of memory.
  std::uint64_t max_state_bytes = std::uint64_t{64} << 30;
};

// A container may exceed its raw bytes slightly (incompressible sections, header, table).
inline std::uint64_t container_slack(std::uint64_t raw) { return raw / 64 + (1u << 20); }

// A stored snapshot's canonical bytes read a section at a time, its delta chain opened with it.
class StoredReader {
 public:
  const Digest& root() const { return root_; }
  std::uint64_t size() const { return file().info().raw_size; }
  const comp::ContainerFile& file() const { return *files_.front(); }  // its bases linked
  comp::RangeReader reader() const { return file().reader(); }

 private:
  friend class SnapshotStore;
  Digest root_{};
  std::vector<std::unique_ptr<comp::ContainerFile>> files_;  // this one, then its bases
};

struct StoredSnapshot {
  std::filesystem::path file;
  comp::Codec codec = comp::Codec::kPlanes;
  std::uint64_t raw_size = 0;
  std::uint64_t stored_size = 0;
  bool already_present = false;
};

class SnapshotStore {
 public:
  SnapshotStore(std::filesystem::path dir, StoreOptions options);
  // A store that reads (and never writes) `relative_dir` below `folder` without following
  // symbolic links (common/folder.h): for serving, where a link planted in the workdir must
  // not hand a peer a file from elsewhere.
  SnapshotStore(std::shared_ptr<const Folder> folder, const std::filesystem::path& relative_dir,
                StoreOptions options);

  std::filesystem::path path_for(const Digest& root) const;
  // How messages name the container of `root`: its path, or for a store that serves peers
  // (the Folder constructor) "the container of snapshot <root>...", which tells a peer nothing
  // of the provider's file layout.
  std::string label(const Digest& root) const;
  bool contains(const Digest& root) const;

  // Stores `canonical` (whose root the caller computed) for `epoch`. With a base (the previous
  // epoch's bytes and root) it is stored as a delta unless epoch % full_every == 0. Idempotent:
  // an existing, valid file for the root is kept.
  Result<StoredSnapshot> put(std::uint64_t epoch, const Digest& root, ByteSpan canonical,
                             std::optional<std::pair<Digest, ByteSpan>> base);

  // Stores the snapshot `source` reads (canonical bytes of `layout`) for `epoch` without holding
  // it: streamed through the coder a window at a time, hashed on the way, coded as a delta
  // against the stored snapshot `base` (read back a section at a time) unless epoch % full_every
  // == 0. Returns the root it hashed; a snapshot already stored under that root is kept.
  struct StreamedPut {
    Digest root{};
    StoredSnapshot stored;
  };
  Result<StreamedPut> put_streamed(std::uint64_t epoch, const CanonicalLayout& layout,
                                   const comp::RangeReader& source,
                                   const std::optional<Digest>& base, ThreadPool* pool);
  // The stored snapshot of `root`, read a section at a time (its chain checked to max_chain).
  Result<std::unique_ptr<StoredReader>> open_reader(const Digest& root) const;

  // The container file as stored, and the canonical bytes it decodes to (following delta bases;
  // every decode checks the root).
  Result<Bytes> load_container(const Digest& root) const;
  Result<Bytes> load_canonical(const Digest& root) const;
  // Decodes a container the caller has read already. A delta whose base is `known` (a snapshot
  // the caller holds, e.g. the epoch it just decoded) uses it instead of loading the chain.
  using KnownBase = std::optional<std::pair<Digest, ByteSpan>>;
  Result<Bytes> decode(const Digest& root, ByteSpan container, const KnownBase& known) const;

  void set_max_state_bytes(std::uint64_t n) { options_.max_state_bytes = n; }

  // Bytes used by containers in the folder.
  std::uint64_t disk_usage() const;

 private:
  Result<Bytes> decode(const Digest& root, ByteSpan container, const KnownBase& known,
                       int depth) const;
  std::filesystem::path dir_;
  std::shared_ptr<const Folder> folder_;  // set: files are read below it
  std::filesystem::path relative_dir_;    // dir_ below folder_
  StoreOptions options_;
  std::unique_ptr<ThreadPool> pool_;  // threads - 1 workers beside the caller; null for one thread
};

}  // namespace vt::provider

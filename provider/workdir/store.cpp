#include "provider/workdir/store.h"

#include "common/file_io.h"

namespace vt::provider {
namespace fs = std::filesystem;

SnapshotStore::SnapshotStore(fs::path dir, StoreOptions options)
    : dir_(std::move(dir)), options_(options) {
  // Coding runs jobs on the calling thread too: a pool as large as the thread count would
  // put one thread more than asked on the cores.
  const std::size_t threads = options.threads == 0 ? hardware_threads() : options.threads;
  if (threads > 1) pool_ = std::make_unique<ThreadPool>(threads - 1);
}

SnapshotStore::SnapshotStore(std::shared_ptr<const Folder> folder, const fs::path& relative_dir,
                             StoreOptions options)
    : SnapshotStore(folder->path() / relative_dir, options) {
  folder_ = std::move(folder);
  relative_dir_ = relative_dir;
}

fs::path SnapshotStore::path_for(const Digest& root) const {
  return dir_ / (hex_encode(root) + ".vtc");
}

bool SnapshotStore::contains(const Digest& root) const {
  if (folder_) return folder_->has_file(relative_dir_ / path_for(root).filename());
  return fs::exists(path_for(root));
}

Result<StoredSnapshot> SnapshotStore::put(std::uint64_t epoch, const Digest& root,
                                          ByteSpan canonical,
                                          std::optional<std::pair<Digest, ByteSpan>> base) {
  StoredSnapshot out;
  out.file = path_for(root);
  out.raw_size = canonical.size();
  if (fs::exists(out.file)) {
    // A crash after the write and before the log append leaves the file; a retrain of the
    // same epoch reproduces the same root, so the file is reused once it checks out.
    VT_ASSIGN_OR_RETURN(Bytes existing, read_file(out.file));
    auto info = comp::read_container_info(existing);
    if (info.ok() && info->root == root && decode(root, existing, base).ok()) {
      out.codec = info->codec;
      out.stored_size = existing.size();
      out.already_present = true;
      return out;
    }
  }
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return io_error("creating " + dir_.string() + ": " + ec.message());
  comp::EncodeOptions enc;
  enc.pool = pool_.get();
  enc.threads = 1;  // without a pool: the calling thread alone
  enc.root = root;
  const bool full = !base || options_.full_every <= 1 ||
                    epoch % static_cast<std::uint64_t>(options_.full_every) == 0;
  enc.codec = full ? comp::Codec::kPlanes : comp::Codec::kDelta;
  if (!full) {
    enc.base = base->second;
    enc.base_root = base->first;
  }
  VT_ASSIGN_OR_RETURN(Bytes container, comp::encode(canonical, enc));
  VT_RETURN_IF_ERROR(write_file_atomic(out.file, container));
  out.codec = enc.codec;
  out.stored_size = container.size();
  return out;
}

Result<std::unique_ptr<StoredReader>> SnapshotStore::open_reader(const Digest& root) const {
  auto reader = std::unique_ptr<StoredReader>(new StoredReader());
  reader->root_ = root;
  std::optional<Digest> next = root;
  for (int depth = 0; next; ++depth) {
    if (depth > options_.max_chain) {
      return invalid_input("snapshot " + hex_encode(root) + ": delta chain longer than " +
                           std::to_string(options_.max_chain) + " (a cycle?)");
    }
    if (!contains(*next))
      return io_error("snapshot " + hex_encode(*next) + " is missing from " + dir_.string());
    // Bounded as load_container bounds it, before a byte is read: a huge or sparse file is
    // refused, not mapped into a decode.
    const std::uint64_t limit =
        options_.max_state_bytes + container_slack(options_.max_state_bytes);
    std::error_code ec;
    const std::uint64_t size = fs::file_size(path_for(*next), ec);
    if (!ec && size > limit) {
      return invalid_input(path_for(*next).string() + " is " + std::to_string(size) +
                           " bytes, more than the limit of " + std::to_string(limit));
    }
    VT_ASSIGN_OR_RETURN(std::unique_ptr<comp::ContainerFile> file,
                        comp::ContainerFile::open(path_for(*next), options_.max_state_bytes));
    if (file->info().root != *next) {
      return invalid_input(label(*next) + ": holds root " + hex_encode(file->info().root) +
                           ", its name says " + hex_encode(*next));
    }
    next = file->info().base_root;
    if (!reader->files_.empty()) {
      comp::ContainerFile& above = *reader->files_.back();
      if (above.info().base_size != file->info().raw_size) {
        return invalid_input(label(above.info().root) + ": its base has " +
                             std::to_string(above.info().base_size) + " bytes, " +
                             label(file->info().root) + " holds " +
                             std::to_string(file->info().raw_size));
      }
      above.set_base(file->reader());
    }
    reader->files_.push_back(std::move(file));
  }
  return reader;
}

Result<SnapshotStore::StreamedPut> SnapshotStore::put_streamed(std::uint64_t epoch,
                                                               const CanonicalLayout& layout,
                                                               const comp::RangeReader& source,
                                                               const std::optional<Digest>& base,
                                                               ThreadPool* pool) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return io_error("creating " + dir_.string() + ": " + ec.message());
  const bool full = !base || options_.full_every <= 1 ||
                    epoch % static_cast<std::uint64_t>(options_.full_every) == 0;
  std::unique_ptr<StoredReader> base_reader;
  std::optional<comp::StreamBase> stream_base;
  if (!full) {
    VT_ASSIGN_OR_RETURN(base_reader, open_reader(*base));
    auto opened = comp::stream_base(base_reader->size(), *base, base_reader->reader());
    if (!opened) return opened.error().context(label(*base));
    stream_base = std::move(*opened);
  }
  comp::EncodeOptions enc;
  enc.pool = pool != nullptr ? pool : pool_.get();
  enc.threads = 1;
  enc.codec = full ? comp::Codec::kPlanes : comp::Codec::kDelta;
  VT_ASSIGN_OR_RETURN(StreamFileWriter out, StreamFileWriter::create(dir_, "streamed.vtc"));
  VT_ASSIGN_OR_RETURN(
      comp::StreamedContainer coded,
      comp::encode_streamed(layout, source, stream_base ? &*stream_base : nullptr, enc, out));
  StreamedPut put{coded.root, {}};
  put.stored.file = path_for(coded.root);
  put.stored.raw_size = layout.total_size;
  // Kept, not replaced: the same root is the same bytes, and the file there may be the base this
  // one was just coded against (a state that did not move), which must not become its own delta.
  // Kept only once it decodes, through its chain, to that root (a crash may have left it broken).
  if (contains(coded.root)) {
    auto existing = open_reader(coded.root);
    if (existing.ok() && comp::check_whole((*existing)->file(), enc.pool).ok()) {
      put.stored.codec = (*existing)->file().info().codec;
      put.stored.stored_size = (*existing)->file().info().container_size;
      put.stored.already_present = true;
      return put;  // `out` removes its temporary file
    }
  }
  VT_RETURN_IF_ERROR(out.commit(put.stored.file));
  put.stored.codec = enc.codec;
  put.stored.stored_size = coded.container_size;
  return put;
}

std::string SnapshotStore::label(const Digest& root) const {
  if (folder_) return "the container of snapshot " + hex_encode(root).substr(0, 16) + "...";
  return path_for(root).string();
}

Result<Bytes> SnapshotStore::load_container(const Digest& root) const {
  const fs::path file = path_for(root);
  const std::uint64_t limit = options_.max_state_bytes + container_slack(options_.max_state_bytes);
  if (folder_) {
    // Served to peers: a file that is not there is evidence the provider does not have, said
    // without where it would be. Any other failure is its machine's, and keeps its detail.
    auto bytes = folder_->read(relative_dir_ / file.filename(), limit);
    std::error_code ec;
    if (!bytes && !fs::exists(fs::symlink_status(file, ec)))
      return invalid_input(label(root) + " is not stored");
    return bytes;
  }
  if (!fs::exists(file))
    return io_error("snapshot " + hex_encode(root) + " is missing from " + dir_.string());
  return read_file(file, limit);
}

Result<Bytes> SnapshotStore::load_canonical(const Digest& root) const {
  if (folder_) {  // served to peers: every read goes through the folder's handle
    VT_ASSIGN_OR_RETURN(Bytes container, load_container(root));
    return decode(root, container, std::nullopt, 0);
  }
  // Section by section through the chain, straight into the output: neither the containers nor
  // the chain's decoded bases are ever whole in memory (they were 3-4 states for a delta).
  VT_ASSIGN_OR_RETURN(std::unique_ptr<StoredReader> reader, open_reader(root));
  auto out = comp::read_whole(reader->file(), pool_.get());
  if (!out) return out.error().context(label(root));
  return out;
}

Result<Bytes> SnapshotStore::decode(const Digest& root, ByteSpan container,
                                    const KnownBase& known) const {
  return decode(root, container, known, 0);
}

Result<Bytes> SnapshotStore::decode(const Digest& root, ByteSpan container, const KnownBase& known,
                                    int depth) const {
  if (depth > options_.max_chain) {
    return invalid_input("snapshot " + hex_encode(root) + ": delta chain longer than " +
                         std::to_string(options_.max_chain) + " (a cycle?)");
  }
  const std::string where = label(root);
  auto info = comp::read_container_info(container);
  if (!info) return info.error().context(where);
  if (info->root != root) {
    return invalid_input(where + ": holds root " + hex_encode(info->root) + ", its name says " +
                         hex_encode(root));
  }
  comp::DecodeOptions dec;
  dec.pool = pool_.get();
  dec.threads = 1;
  dec.max_raw_size = options_.max_state_bytes;
  Bytes loaded_base;
  if (info->base_root) {
    if (known && known->first == *info->base_root) {
      dec.base = known->second;
    } else {
      auto base_container = load_container(*info->base_root);
      auto base = base_container
                      ? decode(*info->base_root, *base_container, std::nullopt, depth + 1)
                      : Result<Bytes>(base_container.error());
      // Named as what it is: this epoch's container codes only the change from that one, so it
      // fails with it.
      if (!base)
        return Error{base.error().code, where + " is stored as a delta on " + base.error().message};
      loaded_base = std::move(*base);
      dec.base = loaded_base;
    }
    dec.base_root = info->base_root;
  }
  auto decoded = comp::decode(container, dec);
  if (!decoded) return decoded.error().context(where);
  return decoded;
}

std::uint64_t SnapshotStore::disk_usage() const {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".vtc") total += entry.file_size();
  }
  return total;
}

}  // namespace vt::provider

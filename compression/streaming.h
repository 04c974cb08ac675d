#pragma once
// Containers written and read a section at a time, so that a snapshot of several gigabytes is
// never whole in memory beside the live state it was read from (docs/container.md, "Streaming").
// encode_streamed writes the same bytes as encode() for the same canonical bytes and base.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>

#include "common/safetensors.h"
#include "common/stream_file.h"
#include "compression/container.h"

namespace vt::comp {

// Fills `out` with the canonical bytes starting at `offset`.
using RangeReader = std::function<Status(std::uint64_t offset, std::span<std::uint8_t> out)>;

// A container file on disk whose sections are read and decoded one at a time. A delta
// container reads its base through `base` (another ContainerFile's read, for a chain).
class ContainerFile {
 public:
  // Checks the header and the section table (bounded by the file's size and `max_raw_size`)
  // before anything else is read.
  static Result<std::unique_ptr<ContainerFile>> open(const std::filesystem::path& path,
                                                     std::uint64_t max_raw_size);
  const ContainerInfo& info() const { return info_; }
  const std::filesystem::path& path() const { return file_.path(); }
  // The reader of the base's canonical bytes; needed before a delta section is read.
  void set_base(RangeReader base) { base_ = std::move(base); }

  // Canonical bytes [offset, offset + out.size()), from the sections that cover them, each
  // checked against its payload and raw checksums. Safe from several threads at once.
  Status read(std::uint64_t offset, std::span<std::uint8_t> out) const;
  RangeReader reader() const {
    return [this](std::uint64_t offset, std::span<std::uint8_t> out) { return read(offset, out); };
  }

 private:
  ContainerFile(PositionalFile file, ContainerInfo info)
      : file_(std::move(file)), info_(std::move(info)) {}
  Status read_section(const SectionInfo& s, std::span<std::uint8_t> out) const;
  PositionalFile file_;
  ContainerInfo info_;
  RangeReader base_;
};

// All of a container's canonical bytes, read in pieces of whole sections on `pool` into one
// buffer (bounded by the limit the file was opened with), and checked against its root.
Result<Bytes> read_whole(const ContainerFile& file, ThreadPool* pool);
// The same checks, every section and the root, a 64 MiB window at a time: a container verified
// without holding its state.
Status check_whole(const ContainerFile& file, ThreadPool* pool);

// The base of a streamed delta: its canonical size, root, layout (a prefix-only view) and bytes.
struct StreamBase {
  std::uint64_t size = 0;
  Digest root{};
  SafetensorsView layout;
  RangeReader read;
};
// The layout of a canonical state of `size` bytes read through `read`: the u64 and the header
// JSON only, bounded and checked as parse_safetensors_prefix checks them. The view's bytes are
// empty: its data() must not be called.
Result<SafetensorsView> read_layout(std::uint64_t size, const RangeReader& read);
// Reads a base's layout through its reader (read_layout).
Result<StreamBase> stream_base(std::uint64_t size, const Digest& root, RangeReader read);

struct StreamedContainer {
  Digest root{};  // the Merkle root of the canonical bytes, hashed as they were read
  ContainerInfo info;
  std::uint64_t container_size = 0;
};

// Codes the canonical snapshot of `layout`, read through `source` a window of sections at a
// time, into `out` (empty on entry), hashing it on the way. options.codec kDelta needs `base`.
// Holds about two windows of `window_bytes` (and one base section per coding thread).
Result<StreamedContainer> encode_streamed(const CanonicalLayout& layout, const RangeReader& source,
                                          const StreamBase* base, const EncodeOptions& options,
                                          StreamFileWriter& out,
                                          std::uint64_t window_bytes = std::uint64_t{64} << 20);

}  // namespace vt::comp

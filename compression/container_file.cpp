// A container read one section at a time (compression/streaming.h).

#include <algorithm>
#include <cstring>

#include "compression/format.h"
#include "compression/section_codec.h"
#include "compression/streaming.h"
#include "fingerprint/merkle.h"

namespace vt::comp {
namespace fs = std::filesystem;

Result<std::unique_ptr<ContainerFile>> ContainerFile::open(const fs::path& path,
                                                           std::uint64_t max_raw_size) {
  VT_ASSIGN_OR_RETURN(PositionalFile file, PositionalFile::open(path));
  const std::string where = path.string();
  if (file.size() < format::kHeaderSize) {
    return invalid_input(where + ": " + std::to_string(file.size()) +
                         " bytes, shorter than a container's header");
  }
  Bytes head(format::kHeaderSize);
  VT_RETURN_IF_ERROR(file.read(0, head));
  const std::uint64_t table_size = get_u64le(head.data() + 24);
  // Bounded by the file before it is read: a table cannot be larger than what holds it.
  if (table_size > file.size() - format::kHeaderSize) {
    return invalid_input(where + ": its header declares a " + std::to_string(table_size) +
                         "-byte section table in a " + std::to_string(file.size()) + "-byte file");
  }
  head.resize(format::kHeaderSize + table_size);
  VT_RETURN_IF_ERROR(
      file.read(format::kHeaderSize, std::span(head).subspan(format::kHeaderSize, table_size)));
  auto info = format::parse_head(head, file.size());
  if (!info) return info.error().context(where);
  if (info->raw_size > max_raw_size) {
    return invalid_input(where + ": declares " + std::to_string(info->raw_size) +
                         " raw bytes, above the limit of " + std::to_string(max_raw_size));
  }
  return std::unique_ptr<ContainerFile>(new ContainerFile(std::move(file), std::move(*info)));
}

Status ContainerFile::read_section(const SectionInfo& s, std::span<std::uint8_t> out) const {
  // The base first: its read (the chain's next container) runs on this thread and uses the
  // same thread_local payload buffer. Not per object: reads run on several threads at once.
  Bytes base;
  if (s.method == Method::kDeltaPlanes) {
    if (!base_) return internal_error("a delta section was read without its base");
    base.resize(s.raw_size);
    VT_RETURN_IF_ERROR(base_(s.base_offset, base));
  }
  thread_local Bytes payload;
  payload.resize(s.payload_size);
  VT_RETURN_IF_ERROR(file_.read(s.payload_offset, payload));
  if (format::xxh3(payload) != s.payload_xxh3)
    return invalid_input("payload is corrupted (checksum mismatch)");
  VT_RETURN_IF_ERROR(decode_section(s, payload, base, out));
  if (format::xxh3(out) != s.raw_xxh3)
    return invalid_input("decoded bytes do not match the section's checksum");
  return {};
}

Status ContainerFile::read(std::uint64_t offset, std::span<std::uint8_t> out) const {
  if (offset > info_.raw_size || out.size() > info_.raw_size - offset) {
    return internal_error(path().string() + ": a read past its " + std::to_string(info_.raw_size) +
                          " canonical bytes");
  }
  const std::vector<SectionInfo>& sections = info_.sections;
  // The first section ending after `offset`.
  auto it = std::upper_bound(
      sections.begin(), sections.end(), offset,
      [](std::uint64_t at, const SectionInfo& s) { return at < s.raw_offset + s.raw_size; });
  std::uint64_t at = offset;
  const std::uint64_t end = offset + out.size();
  Bytes whole;
  for (; at < end && it != sections.end(); ++it) {
    const SectionInfo& s = *it;
    const std::uint64_t from = at - s.raw_offset;
    const std::uint64_t take = std::min(end, s.raw_offset + s.raw_size) - at;
    std::span<std::uint8_t> into = out.subspan(at - offset, take);
    Status decoded;
    if (from == 0 && take == s.raw_size) {
      decoded = read_section(s, into);
    } else {
      whole.resize(s.raw_size);
      decoded = read_section(s, whole);
      if (decoded) std::memcpy(into.data(), whole.data() + from, take);
    }
    if (!decoded) return decoded.error().context(path().string() + ": " + s.label());
    at += take;
  }
  return {};
}

Status check_whole(const ContainerFile& file, ThreadPool* pool) {
  const ContainerInfo& info = file.info();
  constexpr std::uint64_t kWindow = std::uint64_t{64} << 20, kPiece = std::uint64_t{8} << 20;
  fp::MerkleBuilder merkle;
  Bytes window;
  for (std::uint64_t at = 0; at < info.raw_size; at += window.size()) {
    window.resize(std::min(kWindow, info.raw_size - at));
    const std::size_t pieces = (window.size() + kPiece - 1) / kPiece;
    std::vector<std::optional<Error>> errors(pieces);
    for_each_index(pool, pieces, [&](std::size_t i) {
      const std::uint64_t from = i * kPiece, n = std::min(kPiece, window.size() - from);
      Status read = file.read(at + from, std::span(window).subspan(from, n));
      if (!read) errors[i] = read.error();
    });
    for (const std::optional<Error>& e : errors) {
      if (e) return *e;
    }
    merkle.append(window, pool);
  }
  const Digest got = merkle.finish();
  if (got != info.root) {
    return invalid_input(file.path().string() + ": decoded bytes have Merkle root " +
                         hex_encode(got) + ", the header commits to " + hex_encode(info.root));
  }
  return {};
}

Result<Bytes> read_whole(const ContainerFile& file, ThreadPool* pool) {
  const ContainerInfo& info = file.info();
  Bytes out;
  reserve_large(out, info.raw_size);  // bounded by max_raw_size when the file was opened
  out.resize(info.raw_size);
  // Pieces of about 8 MiB of whole sections: each section (and its chain's) decoded once.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> pieces;
  for (const SectionInfo& s : info.sections) {
    if (pieces.empty() || pieces.back().second >= (std::uint64_t{8} << 20)) {
      pieces.emplace_back(s.raw_offset, s.raw_size);
    } else {
      pieces.back().second += s.raw_size;
    }
  }
  std::vector<std::optional<Error>> errors(pieces.size());
  for_each_index(pool, pieces.size(), [&](std::size_t i) {
    Status read =
        file.read(pieces[i].first, std::span(out).subspan(pieces[i].first, pieces[i].second));
    if (!read) errors[i] = read.error();
  });
  for (const std::optional<Error>& e : errors) {
    if (e) return *e;
  }
  const Digest got = fp::merkle_root(out, pool);
  if (got != info.root) {
    return invalid_input(file.path().string() + ": decoded bytes have Merkle root " +
                         hex_encode(got) + ", the header commits to " + hex_encode(info.root));
  }
  return out;
}

Result<SafetensorsView> read_layout(std::uint64_t size, const RangeReader& read) {
  Bytes prefix(std::min<std::uint64_t>(8, size));
  VT_RETURN_IF_ERROR(read(0, prefix));
  if (prefix.size() < 8) return invalid_input("too short for a safetensors file");
  const std::uint64_t n = get_u64le(prefix.data());
  if (n > kMaxSafetensorsHeader || n > size - 8)
    return invalid_input("header length " + std::to_string(n) + " out of bounds");
  prefix.resize(8 + n);
  VT_RETURN_IF_ERROR(read(8, std::span(prefix).subspan(8)));
  VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors_prefix(prefix, size));
  view.bytes = {};  // the prefix buffer goes with this function
  return view;
}

Result<StreamBase> stream_base(std::uint64_t size, const Digest& root, RangeReader read) {
  StreamBase base{size, root, {}, std::move(read)};
  auto layout = read_layout(size, base.read);
  if (!layout) return layout.error().context("base snapshot");
  base.layout = std::move(*layout);
  return base;
}

}  // namespace vt::comp

// Decoder: checks the header and the base, decodes sections in parallel straight into the
// output, and checks section checksums and the Merkle root (docs/container.md, "Decoding").

#include <exception>
#include <string>

#include "compression/container.h"
#include "compression/format.h"
#include "compression/section_codec.h"
#include "fingerprint/merkle.h"

namespace vt::comp {
namespace {

std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
  return a * b;
}
std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  return a + b < a ? UINT64_MAX : a + b;
}

Status check_raw_size(const ContainerInfo& info, ByteSpan container, const DecodeOptions& o) {
  std::uint64_t limit = saturating_add(saturating_mul(container.size(), o.max_expansion),
                                       saturating_mul(o.base.size(), 2));
  limit = std::min(limit, o.max_raw_size);
  if (info.raw_size > limit) {
    return invalid_input("header declares " + std::to_string(info.raw_size) + " raw bytes from a " +
                         std::to_string(container.size()) + "-byte container, above the limit of " +
                         std::to_string(limit) + " (DecodeOptions max_expansion / max_raw_size)");
  }
  return {};
}

Status check_base(const ContainerInfo& info, const DecodeOptions& o, ThreadPool* pool) {
  if (!info.base_root) return {};
  std::string want = hex_encode(*info.base_root);
  if (o.base.empty())
    return invalid_input("this delta container needs its base snapshot (root " + want + ")");
  if (o.base.size() != info.base_size) {
    return invalid_input("base snapshot has " + std::to_string(o.base.size()) +
                         " bytes, the container's base (root " + want + ") has " +
                         std::to_string(info.base_size));
  }
  Digest got = o.base_root ? *o.base_root : fp::merkle_root(o.base, pool);
  if (got != *info.base_root) {
    return invalid_input("base snapshot has root " + hex_encode(got) +
                         ", the container was coded against root " + want);
  }
  return {};
}

Status check_and_decode(const SectionInfo& s, ByteSpan container, ByteSpan base,
                        std::span<std::uint8_t> out) {
  ByteSpan payload = container.subspan(s.payload_offset, s.payload_size);
  std::uint64_t sum = format::xxh3(payload);
  if (sum != s.payload_xxh3) return invalid_input("payload is corrupted (checksum mismatch)");
  ByteSpan base_run;
  if (s.method == Method::kDeltaPlanes) base_run = base.subspan(s.base_offset, s.raw_size);
  VT_RETURN_IF_ERROR(decode_section(s, payload, base_run, out));
  if (format::xxh3(out) != s.raw_xxh3)
    return invalid_input("decoded bytes do not match the section's checksum");
  return {};
}

Result<Bytes> decode_impl(ByteSpan container, const DecodeOptions& o) {
  VT_ASSIGN_OR_RETURN(ContainerInfo info, format::parse(container));
  VT_RETURN_IF_ERROR(check_raw_size(info, container, o));
  if (!info.base_root && !o.base.empty()) {
    return invalid_input("a base snapshot was given but this is a " +
                         std::string(codec_name(info.codec)) + " container");
  }
  std::unique_ptr<ThreadPool> owned;
  ThreadPool* pool = resolve_pool(o.pool, o.threads, owned);
  VT_RETURN_IF_ERROR(check_base(info, o, pool));

  Bytes out;
  reserve_large(out, info.raw_size);  // raw_size was bounded by check_raw_size
  out.resize(info.raw_size);
  std::vector<std::optional<Error>> errors(info.sections.size());
  for_each_index(pool, info.sections.size(), [&](std::size_t i) {
    const SectionInfo& s = info.sections[i];
    Status st =
        check_and_decode(s, container, o.base, std::span(out).subspan(s.raw_offset, s.raw_size));
    if (!st.ok()) errors[i] = st.error().context(s.label());
  });
  for (auto& e : errors) {
    if (e) return *e;
  }
  if (o.verify_root) {
    Digest root = fp::merkle_root(out, pool);
    if (root != info.root) {
      return invalid_input("decoded bytes have Merkle root " + hex_encode(root) +
                           ", the header commits to " + hex_encode(info.root));
    }
  }
  return out;
}

}  // namespace

Result<Bytes> decode(ByteSpan container, const DecodeOptions& options) {
  try {
    auto result = decode_impl(container, options);
    if (!result.ok()) return result.error().context("decoding container");
    return result;
  } catch (const std::bad_alloc&) {
    return internal_error("decoding container: out of memory");
  } catch (const std::exception& e) {
    return internal_error(std::string("decoding container: ") + e.what());
  }
}

}  // namespace vt::comp

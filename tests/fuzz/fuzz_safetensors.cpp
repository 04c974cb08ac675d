// libFuzzer target for the safetensors parser (common/safetensors.h): any byte string parses or
// is refused with an error - never a crash, an out-of-bounds read or an unbounded allocation.
// A file accepted as canonical must re-serialize to exactly its own bytes, and a file accepted
// in any form must re-serialize to bytes that parse as canonical with the same content.

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/safetensors.h"

namespace {

vt::Result<vt::Bytes> rewrite(const vt::SafetensorsView& view) {
  std::vector<vt::TensorData> tensors;
  for (const vt::TensorEntry& t : view.tensors)
    tensors.push_back({{t.name, t.dtype, t.shape}, view.data(t)});
  return vt::write_canonical(tensors, view.metadata);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  vt::ByteSpan input(data, size);
  auto canonical = vt::parse_safetensors(input, vt::Canonical::kRequire);
  if (canonical.ok()) {
    auto again = rewrite(*canonical);
    if (!again.ok() || again->size() != size || std::memcmp(again->data(), data, size) != 0)
      std::abort();
  }
  auto any = vt::parse_safetensors(input, vt::Canonical::kAllowAny);
  if (canonical.ok() && !any.ok()) std::abort();
  if (any.ok()) {
    auto again = rewrite(*any);
    if (!again.ok()) return 0;  // e.g. duplicate names: readable, but not writable canonically
    auto back = vt::parse_safetensors(*again, vt::Canonical::kRequire);
    if (!back.ok() || back->tensors.size() != any->tensors.size() ||
        back->metadata != any->metadata)
      std::abort();
    for (const vt::TensorEntry& t : back->tensors) {
      const vt::TensorEntry* o = any->find(t.name);
      if (o == nullptr || o->dtype != t.dtype || o->shape != t.shape) std::abort();
      vt::ByteSpan a = back->data(t), b = any->data(*o);
      if (a.size() != b.size() || (a.size() && std::memcmp(a.data(), b.data(), a.size()) != 0))
        std::abort();
    }
  }
  return 0;
}

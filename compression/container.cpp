#include "compression/container.h"

#include <array>
#include <string>

#include "compression/format.h"

namespace vt::comp {
namespace {

constexpr std::array<std::string_view, 5> kCodecNames = {"raw", "zstd", "planes", "delta", "xz"};

}  // namespace

std::string_view codec_name(Codec codec) {
  auto i = static_cast<std::size_t>(codec);
  return i < kCodecNames.size() ? kCodecNames[i] : "?";
}

Result<Codec> parse_codec(std::string_view name) {
  for (std::size_t i = 0; i < kCodecNames.size(); ++i) {
    if (kCodecNames[i] == name) return static_cast<Codec>(i);
  }
  return invalid_input("unknown codec '" + std::string(name) +
                       "' (expected raw, zstd, planes, delta or xz)");
}

std::string_view method_name(Method method) {
  switch (method) {
    case Method::kStored:
      return "stored";
    case Method::kZstd:
      return "zstd";
    case Method::kPlanes:
      return "planes";
    case Method::kDeltaPlanes:
      return "delta-planes";
    case Method::kXzPlanes:
      return "xz-planes";
  }
  return "?";
}

std::string SectionInfo::label() const {
  std::string out = "section " + std::to_string(index);
  if (index == 0 && name == "__header__") return out + " (safetensors header)";
  return out + " (tensor '" + name + "' chunk " + std::to_string(chunk) + ")";
}

Result<ContainerInfo> read_container_info(ByteSpan container) { return format::parse(container); }

Result<ExtractedSection> extract_section(ByteSpan container, std::uint32_t index) {
  VT_ASSIGN_OR_RETURN(ContainerInfo info, format::parse(container));
  if (index >= info.sections.size()) {
    return invalid_input("section " + std::to_string(index) +
                         " does not exist (the container has " +
                         std::to_string(info.sections.size()) + ")");
  }
  const SectionInfo& s = info.sections[index];
  ByteSpan payload = container.subspan(s.payload_offset, s.payload_size);
  if (format::xxh3(payload) != s.payload_xxh3)
    return invalid_input(s.label() + ": payload is corrupted (checksum mismatch)");
  ExtractedSection out;
  out.format = s.method == Method::kStored     ? FrameFormat::kNone
               : s.method == Method::kXzPlanes ? FrameFormat::kXz
                                               : FrameFormat::kZstd;
  out.payload.assign(payload.begin(), payload.end());
  return out;
}

}  // namespace vt::comp

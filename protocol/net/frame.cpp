#include "protocol/net/frame.h"

#include <cstring>

#include "common/json.h"
#include "common/json_fields.h"

namespace vt::wire {
namespace {

constexpr std::string_view kNames[] = {
    "?",          "hello",  "get_task",     "task",           "get_log",       "log",
    "subscribe",  "commit", "get_snapshot", "snapshot_begin", "snapshot_data", "snapshot_end",
    "get_chunks", "chunk",  "chunks_end",   "error",          "get_trace",     "trace",
};
static_assert(std::size(kNames) == kMaxMessageType + 1);

template <typename T>
Parsed<T> fail(FrameErrc errc, std::string message) {
  return Parsed<T>{std::nullopt, FrameError{errc, std::move(message)}};
}

}  // namespace

std::string_view message_name(MessageType type) {
  auto i = static_cast<std::uint8_t>(type);
  return i <= kMaxMessageType ? kNames[i] : kNames[0];
}

std::string_view frame_errc_code(FrameErrc errc) {
  switch (errc) {
    case FrameErrc::kBadVersion:
      return "unsupported_version";
    case FrameErrc::kTooLarge:
      return "frame_too_large";
    case FrameErrc::kBadMagic:
    case FrameErrc::kBadType:
    case FrameErrc::kBadFlags:
    case FrameErrc::kBadHeader:
      return "bad_frame";
  }
  return "bad_frame";
}

Parsed<FramePrefix> parse_prefix(ByteSpan prefix, const FrameLimits& limits) {
  if (prefix.size() != kPrefixSize)
    return fail<FramePrefix>(FrameErrc::kBadHeader,
                             "frame prefix must be 16 bytes, got " + std::to_string(prefix.size()));
  if (std::memcmp(prefix.data(), kMagic, 4) != 0)
    return fail<FramePrefix>(FrameErrc::kBadMagic, "bad magic " + hex_encode(prefix.first(4)) +
                                                       " (expected 56545750 \"VTWP\")");
  if (prefix[4] != kWireVersion)
    return fail<FramePrefix>(FrameErrc::kBadVersion, "frame version " + std::to_string(prefix[4]) +
                                                         " is not supported (this side speaks " +
                                                         std::to_string(kWireVersion) + ")");
  if (prefix[5] == 0 || prefix[5] > kMaxMessageType)
    return fail<FramePrefix>(FrameErrc::kBadType,
                             "unknown message type " + std::to_string(prefix[5]));
  if (prefix[6] != 0 || prefix[7] != 0)
    return fail<FramePrefix>(FrameErrc::kBadFlags,
                             "frame flags must be 0, got 0x" + hex_encode(prefix.subspan(6, 2)));
  FramePrefix out;
  out.type = static_cast<MessageType>(prefix[5]);
  out.header_size = get_u32le(prefix.data() + 8);
  out.payload_size = get_u32le(prefix.data() + 12);
  std::string what(message_name(out.type));
  if (out.header_size < 2)
    return fail<FramePrefix>(FrameErrc::kBadHeader, what + " frame: header of " +
                                                        std::to_string(out.header_size) +
                                                        " bytes cannot hold a JSON object");
  if (out.header_size > limits.max_header)
    return fail<FramePrefix>(FrameErrc::kTooLarge, what + " frame: header of " +
                                                       std::to_string(out.header_size) +
                                                       " bytes exceeds the limit of " +
                                                       std::to_string(limits.max_header));
  if (out.payload_size > limits.max_payload)
    return fail<FramePrefix>(FrameErrc::kTooLarge, what + " frame: payload of " +
                                                       std::to_string(out.payload_size) +
                                                       " bytes exceeds the limit of " +
                                                       std::to_string(limits.max_payload));
  return Parsed<FramePrefix>{out, {}};
}

Parsed<Frame> parse_body(const FramePrefix& prefix, ByteSpan body) {
  std::string what(message_name(prefix.type));
  if (body.size() != prefix.body_size())
    return fail<Frame>(FrameErrc::kBadHeader,
                       what + " frame: body is " + std::to_string(body.size()) +
                           " bytes, prefix declared " + std::to_string(prefix.body_size()));
  auto parsed = parse_header(prefix, body.first(prefix.header_size));
  if (parsed.ok()) {
    auto payload = body.subspan(prefix.header_size);
    parsed.value->payload.assign(payload.begin(), payload.end());
  }
  return parsed;
}

Parsed<Frame> parse_header(const FramePrefix& prefix, ByteSpan text) {
  std::string what(message_name(prefix.type));
  if (text.size() != prefix.header_size)
    return fail<Frame>(FrameErrc::kBadHeader,
                       what + " frame: header is " + std::to_string(text.size()) +
                           " bytes, prefix declared " + std::to_string(prefix.header_size));
  auto parsed =
      parse_json_bounded(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()),
                         what + " frame: header");
  if (!parsed.ok()) return fail<Frame>(FrameErrc::kBadHeader, parsed.error().message);
  nlohmann::json header = std::move(parsed).value();
  if (!header.is_object())
    return fail<Frame>(FrameErrc::kBadHeader, what + " frame: header must be a JSON object");
  Frame frame;
  frame.type = prefix.type;
  frame.header = std::move(header);
  return Parsed<Frame>{std::move(frame), {}};
}

ParseResult parse_frame(ByteSpan bytes, const FrameLimits& limits) {
  ParseResult out;
  if (bytes.size() < kPrefixSize) {
    out.need_more = true;
    return out;
  }
  auto prefix = parse_prefix(bytes.first(kPrefixSize), limits);
  if (!prefix.ok()) {
    out.frame = fail<Frame>(prefix.error.errc, prefix.error.message);
    return out;
  }
  std::uint64_t total = kPrefixSize + prefix.value->body_size();
  if (bytes.size() < total) {
    out.need_more = true;
    return out;
  }
  out.frame = parse_body(*prefix.value, bytes.subspan(kPrefixSize, prefix.value->body_size()));
  if (out.frame.ok()) out.consumed = static_cast<std::size_t>(total);
  return out;
}

Bytes encode_head(MessageType type, const nlohmann::json& header, std::uint32_t payload_size) {
  // Headers are built by this code from validated values, so dump() cannot meet bad UTF-8;
  // replacing keeps a bug from turning into an exception on the I/O thread.
  std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Sized once and filled in place (GCC 12 misreads an insert after a resize as overflowing).
  Bytes out(kPrefixSize + text.size());
  std::memcpy(out.data(), kMagic, 4);
  out[4] = kWireVersion;
  out[5] = static_cast<std::uint8_t>(type);
  put_u32le(out.data() + 8, static_cast<std::uint32_t>(text.size()));
  put_u32le(out.data() + 12, payload_size);
  std::memcpy(out.data() + kPrefixSize, text.data(), text.size());
  return out;
}

Bytes encode_frame(MessageType type, const nlohmann::json& header, ByteSpan payload) {
  Bytes out = encode_head(type, header, static_cast<std::uint32_t>(payload.size()));
  append_bytes(out, payload);
  return out;
}

Bytes encode_error(std::string_view code, std::string_view message) {
  return encode_frame(MessageType::kError,
                      {{"code", std::string(code)}, {"message", std::string(message)}});
}

// A header's fields read as every other document's (common/json_fields.h): "hello header:
// token: expected a string, got 7".
JsonFields header_fields(const Frame& frame) {
  return JsonFields(frame.header, std::string(message_name(frame.type)) + " header", "",
                    "the header");
}

Result<std::uint64_t> get_u64(const Frame& frame, std::string_view field) {
  std::uint64_t out = 0;
  VT_RETURN_IF_ERROR(header_fields(frame).unsigned64(field, out, true));
  return out;
}

Result<std::string> get_string(const Frame& frame, std::string_view field) {
  std::string out;
  VT_RETURN_IF_ERROR(header_fields(frame).string(field, out, true));
  return out;
}

Result<Digest> get_digest(const Frame& frame, std::string_view field) {
  VT_ASSIGN_OR_RETURN(std::string text, get_string(frame, field));
  return digest_from_hex(text, std::string(message_name(frame.type)) + "." + std::string(field));
}

Result<std::optional<std::string>> get_optional_string(const Frame& frame, std::string_view field) {
  std::optional<std::string> out;
  VT_RETURN_IF_ERROR(header_fields(frame).optional_string(field, out));
  return out;
}

}  // namespace vt::wire

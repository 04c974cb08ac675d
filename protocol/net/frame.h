#pragma once
// Wire frames (docs/protocol.md). Pure encoding and parsing: no sockets, no TLS, no LibTorch,
// so the parser can be fuzzed on its own (tests/fuzz/fuzz_frame.cpp).
//
// Every message is one frame, little-endian:
//
//   offset  size  field
//   0       4     magic "VTWP" (0x56 0x54 0x57 0x50)
//   4       1     version (kWireVersion)
//   5       1     message type (MessageType)
//   6       2     flags, must be 0
//   8       4     H: header length; the header is a UTF-8 JSON object, 2 <= H <= max_header
//   12      4     P: payload length, 0 <= P <= max_payload
//   16      H     header JSON
//   16+H    P     payload (opaque bytes; what they are depends on the type)
//
// A reader first takes the 16-byte prefix, checks it against its limits before allocating
// anything, then reads H + P bytes.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/bytes.h"

namespace vt::wire {

inline constexpr std::uint8_t kMagic[4] = {0x56, 0x54, 0x57, 0x50};
inline constexpr std::uint8_t kWireVersion = 1;
inline constexpr std::size_t kPrefixSize = 16;

// The protocol version that hello negotiates; today it equals the frame version.
inline constexpr std::uint64_t kProtocolVersion = 1;
inline constexpr std::string_view kSoftwareName = "veritrain/0.1";
// What hello advertises: the requests this side serves and the features of get_snapshot.
inline constexpr std::string_view kCapabilities[] = {"get_task",     "get_log",    "subscribe",
                                                     "get_snapshot", "get_chunks", "delta",
                                                     "resume",       "get_trace"};

enum class MessageType : std::uint8_t {
  kHello = 1,
  kGetTask = 2,
  kTask = 3,
  kGetLog = 4,
  kLog = 5,
  kSubscribe = 6,
  kCommit = 7,
  kGetSnapshot = 8,
  kSnapshotBegin = 9,
  kSnapshotData = 10,
  kSnapshotEnd = 11,
  kGetChunks = 12,
  kChunk = 13,
  kChunksEnd = 14,
  kError = 15,
  kGetTrace = 16,
  kTrace = 17,
};
inline constexpr std::uint8_t kMaxMessageType = 17;

std::string_view message_name(MessageType type);  // "hello", "get_task", ...

struct FrameLimits {
  std::uint32_t max_header = 64u << 10;
  std::uint32_t max_payload = 4u << 20;
};

struct FramePrefix {
  MessageType type = MessageType::kError;
  std::uint32_t header_size = 0;
  std::uint32_t payload_size = 0;
  std::uint64_t body_size() const { return std::uint64_t{header_size} + payload_size; }
};

// Why a frame was refused; the error code that goes back to the peer (docs/protocol.md).
enum class FrameErrc { kBadMagic, kBadVersion, kBadType, kBadFlags, kTooLarge, kBadHeader };
std::string_view frame_errc_code(FrameErrc errc);  // "bad_frame", "unsupported_version", ...

struct FrameError {
  FrameErrc errc = FrameErrc::kBadHeader;
  std::string message;
};

template <typename T>
struct Parsed {
  std::optional<T> value;
  FrameError error;
  bool ok() const { return value.has_value(); }
};

// Checks the fixed 16 bytes. `prefix` must hold exactly kPrefixSize bytes.
Parsed<FramePrefix> parse_prefix(ByteSpan prefix, const FrameLimits& limits);

struct Frame {
  MessageType type = MessageType::kError;
  nlohmann::json header = nlohmann::json::object();
  Bytes payload;
};

// Parses the header that follows a checked prefix; the frame's payload is left empty for the
// caller to read straight into (no copy of a 1 MiB chunk).
Parsed<Frame> parse_header(const FramePrefix& prefix, ByteSpan header);

// Parses the body (header + payload) that follows a checked prefix. The header must be a JSON
// object in valid UTF-8.
Parsed<Frame> parse_body(const FramePrefix& prefix, ByteSpan body);

// Parses one whole frame from the start of `bytes`. `consumed` gets the frame's total size;
// with too few bytes for a whole frame the result is empty and `consumed` is 0 with
// `need_more` set.
struct ParseResult {
  Parsed<Frame> frame;
  std::size_t consumed = 0;
  bool need_more = false;
};
ParseResult parse_frame(ByteSpan bytes, const FrameLimits& limits);

// The 16-byte prefix and header of a frame whose payload the caller sends separately (so a
// 1 MiB chunk is never copied into a frame buffer).
Bytes encode_head(MessageType type, const nlohmann::json& header, std::uint32_t payload_size);
// A whole frame in one buffer.
Bytes encode_frame(MessageType type, const nlohmann::json& header, ByteSpan payload = {});

// An error frame: {"code": code, "message": message}.
Bytes encode_error(std::string_view code, std::string_view message);

// Typed access to header fields that names the message and field on failure.
Result<std::uint64_t> get_u64(const Frame& frame, std::string_view field);
Result<std::string> get_string(const Frame& frame, std::string_view field);
Result<Digest> get_digest(const Frame& frame, std::string_view field);
// The field when present, else nullopt; wrong type is an error.
Result<std::optional<std::string>> get_optional_string(const Frame& frame, std::string_view field);

}  // namespace vt::wire

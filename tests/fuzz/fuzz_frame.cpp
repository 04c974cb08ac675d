// libFuzzer target for the wire frame parser (protocol/net/frame.h): any byte string must parse to
// a frame, ask for more bytes, or be refused with a FrameError - never crash, never read out of
// bounds, never allocate more than the limits allow. A frame that parses must re-encode to a
// frame that parses to the same type, header and payload.

#include <cstdint>
#include <cstdlib>

#include "protocol/net/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace vt::wire;
  FrameLimits limits{64u << 10, 1u << 20};
  vt::ByteSpan input(data, size);
  while (!input.empty()) {
    ParseResult r = parse_frame(input, limits);
    if (r.need_more || !r.frame.ok()) break;
    const Frame& f = *r.frame.value;
    vt::Bytes again = encode_frame(f.type, f.header, f.payload);
    ParseResult back = parse_frame(again, FrameLimits{0xFFFFFFFFu, 0xFFFFFFFFu});
    if (!back.frame.ok() || back.frame.value->type != f.type ||
        back.frame.value->header != f.header || back.frame.value->payload != f.payload)
      std::abort();
    input = input.subspan(r.consumed);
  }
  for (const char* field : {"epoch", "offset", "codec", "root"}) {
    Frame f;
    f.type = MessageType::kGetSnapshot;
    auto r = parse_frame(vt::ByteSpan(data, size), limits);
    if (!r.frame.ok()) break;
    f.header = r.frame.value->header;
    (void)get_u64(f, field);
    (void)get_string(f, field);
    (void)get_digest(f, field);
    (void)get_optional_string(f, field);
  }
  return 0;
}

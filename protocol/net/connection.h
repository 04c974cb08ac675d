#pragma once
// A blocking client-side byte stream to a veritrain server: TCP, then TLS 1.3 with the server
// certificate pinned (or verified against a CA file), or plain TCP on loopback when explicitly
// insecure. Every call has a deadline. Client (client.h) speaks the protocol over it; tests use
// it directly to send what no well-behaved client would.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "protocol/net/frame.h"

namespace vt {

struct ClientConfig {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::string token;              // the server's bearer token
  std::string pin_sha256;         // the certificate fingerprint (keys.h certificate_fingerprint)
  std::filesystem::path ca_file;  // or: a CA that signed the server's certificate
  bool insecure = false;          // plain TCP; refused unless host resolves to loopback only
  std::chrono::milliseconds connect_timeout{10'000};  // TCP connect, TLS handshake and hello
  std::chrono::milliseconds io_timeout{60'000};       // one frame, either way
  // The end of the whole exchange (verify --deadline): every wait is cut short to it, and what
  // it cuts is the provider's fault (kRejected), as is a call made after it.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // A snapshot download must move at least min_transfer_rate bytes per second, measured over
  // each progress_window; a provider that drips (one byte a second, a frame at a time, each
  // within io_timeout) is rejected instead of holding the verifier for ever.
  std::uint64_t min_transfer_rate = 64u << 10;
  std::chrono::milliseconds progress_window{10'000};
  int max_resumes = 3;  // reconnect-and-resume attempts within one snapshot download
  wire::FrameLimits limits{1u << 20, 64u << 20};  // what a server frame may declare
  // The largest canonical snapshot accepted (decoded size; a container may be a little larger,
  // compression/container.h). Refused before allocating: set it from the task's state size.
  std::uint64_t max_snapshot_bytes = std::uint64_t{64} << 30;
};

class Connection {
 public:
  // Connects and completes the TLS handshake; the pin is checked before this returns.
  static Result<Connection> open(const ClientConfig& config);
  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;
  ~Connection();

  Status write(ByteSpan bytes);
  Status send(wire::MessageType type, const nlohmann::json& header, ByteSpan payload = {});
  // The next frame, error frames included; fails on I/O errors, timeouts and malformed frames.
  Result<wire::Frame> read_frame();
  Result<wire::Frame> read_frame(std::chrono::milliseconds timeout);
  // The same, with the payload appended to `sink` rather than stored in the frame. On failure
  // `sink` may have grown by up to the declared payload size; the caller trims it back.
  Result<wire::Frame> read_frame_into(Bytes& sink, std::chrono::milliseconds timeout);
  // True once the peer has closed (reads EOF within `timeout`); false if it is still open.
  bool wait_closed(std::chrono::milliseconds timeout);
  void close();
  bool is_open() const;

  std::string where() const;  // "host:port" for messages

  struct Impl;

 private:
  explicit Connection(std::unique_ptr<Impl> impl);
  Result<wire::Frame> read_frame_to(Bytes* sink, std::chrono::milliseconds timeout);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vt

#pragma once
// A provider that speaks the wire protocol (docs/protocol.md) correctly up to the point where it
// turns hostile: plain TCP on loopback, hello and get_task answered honestly, and then, by mode,
// a log that never ends, log frames that promise more and carry nothing, or a snapshot that
// drips (a small data frame at a time, each well within the client's per-frame timeout). Used by
// the client tests and by the `hostile_provider` tool that measures `verify` against it.

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/sha256.h"
#include "protocol/log.h"
#include "protocol/net/frame.h"

namespace vt::testing {

enum class Hostility {
  kEndlessLog,      // get_log: the real records, then valid-looking ones for ever
  kEmptyLogFrames,  // get_log: frames with more=true and no records, for ever
  kDrip,       // get_snapshot: a begin frame, then `drip_bytes` per data frame every `drip_every`
  kDeepHello,  // hello: a header nested 100,000 deep
  kHugeHelloHeader,  // hello: a frame prefix that declares a 4 GiB header
  kMalformedLog,     // get_log: a frame with a bad magic
  // get_log: the real records before epoch `forge_from`, then fabricated ones for ever, in frames
  // of about `frame_bytes`: consecutive epochs, chained, each a copy of the last real record's
  // body under a bogus 64-byte signature.
  kForgedEndlessLog,
};

struct HostileOptions {
  Hostility mode = Hostility::kDrip;
  Bytes task;                              // served for get_task
  std::vector<Bytes> log_lines;            // encoded records, served for get_log (ends in '\n')
  std::uint64_t declared_size = 1u << 20;  // the container size snapshot_begin announces
  std::string root_hex = std::string(64, '0');  // the root snapshot_begin announces, unless
  std::vector<std::string> roots_hex;           // the requested epoch has one here
  std::size_t drip_bytes = 1;
  std::chrono::milliseconds drip_every{100};
  std::uint16_t port = 0;                          // 0: any free port
  std::uint64_t forge_from = 1;                    // kForgedEndlessLog
  std::size_t frame_bytes = std::size_t{4} << 20;  // kForgedEndlessLog
};

class HostileProvider {
 public:
  explicit HostileProvider(HostileOptions options) : options_(std::move(options)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(options_.port);
    // A port that cannot be bound would make every test against it fail far from the cause.
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listen_fd_, 16) != 0)
      throw std::runtime_error("hostile provider: cannot listen on port " +
                               std::to_string(options_.port));
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { accept_loop(); });
  }
  ~HostileProvider() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    ::close(listen_fd_);
  }
  HostileProvider(const HostileProvider&) = delete;
  HostileProvider& operator=(const HostileProvider&) = delete;

  std::uint16_t port() const { return port_; }
  std::uint64_t frames_sent() const { return frames_sent_; }

 private:
  void accept_loop() {
    std::vector<std::thread> sessions;
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      sessions.emplace_back([this, fd] {
        serve(fd);
        ::close(fd);
      });
    }
    for (auto& t : sessions) t.join();
  }

  bool send_frame(int fd, wire::MessageType type, const nlohmann::json& header,
                  ByteSpan payload = {}) {
    Bytes frame = wire::encode_frame(type, header, payload);
    std::size_t done = 0;
    while (done < frame.size()) {
      ssize_t n = ::send(fd, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<std::size_t>(n);
    }
    ++frames_sent_;
    return true;
  }

  // The next request, or nothing when the client left (or the provider stops).
  std::optional<wire::Frame> read_request(int fd, Bytes& buffer) {
    for (;;) {
      auto parsed = wire::parse_frame(buffer, wire::FrameLimits{1u << 20, 1u << 20});
      if (!parsed.need_more) {
        if (!parsed.frame.ok()) return std::nullopt;
        buffer.erase(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(parsed.consumed));
        return std::move(*parsed.frame.value);
      }
      pollfd p{fd, POLLIN, 0};
      if (stop_) return std::nullopt;
      if (::poll(&p, 1, 100) <= 0) continue;
      std::uint8_t chunk[4096];
      ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) return std::nullopt;
      buffer.insert(buffer.end(), chunk, chunk + n);
    }
  }

  void serve(int fd) {
    Bytes buffer;
    while (auto request = read_request(fd, buffer)) {
      using wire::MessageType;
      switch (request->type) {
        case MessageType::kHello: {
          nlohmann::json hello = {{"version", wire::kProtocolVersion}, {"server", "hostile"}};
          if (options_.mode == Hostility::kDeepHello) {
            // Sent raw: the bytes are what matters, nlohmann would recurse building them.
            std::string deep =
                "{\"version\":1,\"x\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
            Bytes head = wire::encode_head(MessageType::kHello, nlohmann::json::object(), 0);
            Bytes frame(head.begin(), head.begin() + wire::kPrefixSize);
            put_u32le(frame.data() + 8, static_cast<std::uint32_t>(deep.size()));
            frame.insert(frame.end(), deep.begin(), deep.end());
            ::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);
            return;
          }
          if (options_.mode == Hostility::kHugeHelloHeader) {
            Bytes prefix = wire::encode_head(MessageType::kHello, hello, 0);
            prefix.resize(wire::kPrefixSize);
            put_u32le(prefix.data() + 8, 0xFFFFFFFFu);
            ::send(fd, prefix.data(), prefix.size(), MSG_NOSIGNAL);
            return;
          }
          if (!send_frame(fd, MessageType::kHello, hello)) return;
          break;
        }
        case MessageType::kGetTask:
          if (!send_frame(fd, MessageType::kTask, {{"size", options_.task.size()}}, options_.task))
            return;
          break;
        case MessageType::kGetLog:
          serve_log(fd);
          return;
        case MessageType::kGetSnapshot:
          serve_snapshot(fd, *request);
          return;
        default:
          return;
      }
    }
  }

  // Frames of fabricated records, each a well-formed line with a signature nobody made.
  void serve_forged_log(int fd) {
    std::uint64_t epoch = 0;
    Digest prev{};
    for (; epoch < options_.forge_from && epoch < options_.log_lines.size(); ++epoch) {
      const Bytes& line = options_.log_lines[epoch];
      if (!send_frame(fd, wire::MessageType::kLog,
                      {{"from_epoch", epoch}, {"count", 1}, {"more", true}}, line))
        return;
      prev = sha256(line);
    }
    auto model = decode_record(options_.log_lines.at(epoch - 1));
    if (!model.ok()) return;
    const std::string bogus(128, 'a');  // 64 bytes in hex
    while (!stop_) {
      Bytes frame;
      const std::uint64_t first = epoch;
      while (frame.size() < options_.frame_bytes) {
        CommitRecord r = model->record;
        r.epoch = epoch++;
        r.prev = prev;
        auto body = commit_body_json(r);
        if (!body.ok()) return;
        const std::size_t at = frame.size();
        frame.insert(frame.end(), body->begin(), body->end());
        frame.push_back('\t');
        frame.insert(frame.end(), bogus.begin(), bogus.end());
        frame.push_back('\n');
        prev = sha256(ByteSpan(frame).subspan(at));
      }
      if (!send_frame(fd, wire::MessageType::kLog,
                      {{"from_epoch", first}, {"count", epoch - first}, {"more", true}}, frame))
        return;
    }
  }

  void serve_log(int fd) {
    if (options_.mode == Hostility::kForgedEndlessLog) return serve_forged_log(fd);
    if (options_.mode == Hostility::kMalformedLog) {
      const std::string garbage = "NOPE not a frame at all";
      ::send(fd, garbage.data(), garbage.size(), MSG_NOSIGNAL);
      return;
    }
    const bool honest_log =
        options_.mode != Hostility::kEndlessLog && options_.mode != Hostility::kEmptyLogFrames;
    std::uint64_t epoch = 0;
    for (const Bytes& line : options_.log_lines) {
      const bool more = !honest_log || epoch + 1 < options_.log_lines.size();
      if (!send_frame(fd, wire::MessageType::kLog,
                      {{"from_epoch", epoch++}, {"count", 1}, {"more", more}}, line))
        return;
    }
    if (honest_log) return;
    const Bytes filler = options_.log_lines.empty() ? Bytes{} : options_.log_lines.back();
    while (!stop_) {
      const bool empty = options_.mode == Hostility::kEmptyLogFrames || filler.empty();
      nlohmann::json header = {{"from_epoch", epoch}, {"count", empty ? 0 : 1}, {"more", true}};
      if (!send_frame(fd, wire::MessageType::kLog, header, empty ? ByteSpan{} : ByteSpan(filler)))
        return;
      if (!empty) ++epoch;
    }
  }

  void serve_snapshot(int fd, const wire::Frame& request) {
    const std::uint64_t epoch = request.header.value("epoch", std::uint64_t{0});
    const std::string root =
        epoch < options_.roots_hex.size() ? options_.roots_hex[epoch] : options_.root_hex;
    nlohmann::json begin = {{"epoch", epoch},
                            {"codec", "planes"},
                            {"root", root},
                            {"base_root", nullptr},
                            {"size", options_.declared_size},
                            {"offset", 0},
                            {"container_id", std::string(64, 'c')},
                            {"chunk", options_.drip_bytes}};
    if (!send_frame(fd, wire::MessageType::kSnapshotBegin, begin)) return;
    Bytes drop(options_.drip_bytes, 0x5a);
    for (std::uint64_t at = 0; !stop_ && at < options_.declared_size; at += drop.size()) {
      std::this_thread::sleep_for(options_.drip_every);
      char sum[17];
      std::snprintf(sum, sizeof(sum), "%016llx",
                    static_cast<unsigned long long>(XXH3_64bits(drop.data(), drop.size())));
      if (!send_frame(fd, wire::MessageType::kSnapshotData, {{"offset", at}, {"xxh3", sum}}, drop))
        return;
    }
  }

  HostileOptions options_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> frames_sent_{0};
  std::thread thread_;
};

}  // namespace vt::testing

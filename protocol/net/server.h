#pragma once
// The provider service (docs/protocol.md): serves a Catalog to verifiers over TLS 1.3, or over
// plain TCP on loopback when explicitly asked. Its io_context runs on its own threads; every
// public method may be called from any thread.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "protocol/net/catalog.h"
#include "protocol/net/frame.h"
#include "protocol/net/metrics.h"

namespace vt {

struct ServerLimits {
  wire::FrameLimits request{64u << 10, 64u << 10};  // what a client frame may declare
  std::uint32_t snapshot_chunk = 1u << 20;          // payload per snapshot_data frame, <= 16 MiB
  // Connection slots (protocol/net/admission.h): a connection is silent until its first bytes,
  // then handshaking until its hello carried the token, and only then takes one of
  // max_connections; each stage has its own pool, so sockets that never speak cannot take the
  // slots of handshakes, nor handshakes those of verifiers.
  std::size_t max_connections = 64;              // authenticated; more are told "busy" and closed
  std::size_t max_connections_per_address = 16;  // authenticated, from one IP address (IPv6: /64)
  // Handshaking (from the first bytes to a valid hello): when full, the oldest member of the
  // address that holds the most makes room once it has had unauthenticated_grace to say hello.
  std::size_t max_unauthenticated = 32;
  std::size_t max_unauthenticated_per_address = 16;
  std::chrono::milliseconds unauthenticated_grace{500};
  // Silent: accepted, nothing received yet; the oldest of the address that holds the most
  // makes room at once. start() lowers this if the descriptor limit cannot hold every pool.
  std::size_t max_silent = 1024;
  std::chrono::milliseconds accept_backoff{200};  // pause when out of file descriptors
  std::size_t max_chunks_per_request = 64;        // get_chunks indices
  // A session writes one frame and waits for it to drain before building the next, so a
  // connection never holds more than one frame (snapshot_chunk + header) in flight: a slow
  // reader slows only its own stream (backpressure through TCP).
  std::chrono::milliseconds handshake_timeout{
      5'000};  // first bytes, TLS handshake and the hello frame, together
  std::chrono::milliseconds idle_timeout{300'000};  // between requests
  std::chrono::milliseconds read_timeout{30'000};   // the rest of a frame once begun
  std::chrono::milliseconds write_timeout{60'000};  // one frame to the client
};

struct ServerConfig {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: any free port; endpoint() tells which
  // Or: an inherited, already listening TCP socket to serve on (socket activation; host and
  // port are then its own). A parent that binds before starting the server lets clients connect
  // at once: they wait in the backlog instead of polling until the server is up. The server
  // owns the descriptor once start() succeeds.
  int listen_fd = -1;
  std::filesystem::path tls_cert;  // PEM; required unless insecure
  std::filesystem::path tls_key;
  bool insecure = false;    // plain TCP, refused unless host is a loopback address
  std::string token;        // bearer token every client must present in hello; required
  std::size_t threads = 4;  // I/O: every connection's reads, writes and cheap requests
  // Snapshot loads, decodes, encodes and chunk proofs (protocol/net/slow_work.h), at a lower CPU
  // priority; also the most encodes the catalog is asked for at once.
  std::size_t slow_threads = 2;
  ServerLimits limits;
};

struct Endpoint {
  std::string host;
  std::uint16_t port = 0;
};

class Server {
 public:
  // Binds, listens and starts serving before it returns. Every connection slot needs a file
  // descriptor: when the soft RLIMIT_NOFILE cannot hold all the pools, start() raises it (up
  // to the hard limit), and failing that gives the silent pool fewer slots, never the others.
  static Result<std::unique_ptr<Server>> start(ServerConfig config,
                                               std::shared_ptr<Catalog> catalog);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  Endpoint endpoint() const;

  // Tells subscribers that the commitment of `epoch` is durable (appended and fsync'd): each
  // one fetches the new records from the catalog and pushes them.
  void notify_commit(std::uint64_t epoch);

  // Closes the listener and every connection; returns when the I/O threads have ended.
  void stop();

  std::shared_ptr<const Metrics> metrics() const;

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vt

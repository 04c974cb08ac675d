// Snapshot transfer over loopback: the protocol over TLS 1.3 against a plain TCP copy of the same
// container bytes, measured in the same run (best of 3 each).
//
//   tls_mb_per_s         Client::fetch_container over TLS (chunk checksums and SHA-256 checked)
//   plain_mb_per_s       the same call with the server in --insecure (plain TCP) mode
//   tcp_copy_mb_per_s    the baseline: one send() stream of the bytes into a reader thread
//   tls_vs_tcp_ratio     tls_mb_per_s / tcp_copy_mb_per_s (goal >= 0.8)
//   verified_mb_per_s    Client::get_snapshot: transfer, decode and Merkle root check

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "bench/bench_util.h"
#include "protocol/client.h"
#include "protocol/keys.h"
#include "protocol/server.h"
#include "tests/protocol/memory_catalog.h"

namespace {

using namespace vt;

// Sends `bytes` through a loopback TCP connection into a reader thread; seconds until all read.
double tcp_copy_seconds(const Bytes& bytes) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::listen(listener, 1);
  socklen_t len = sizeof(addr);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  auto start = std::chrono::steady_clock::now();
  std::thread reader([&] {
    int fd = ::accept(listener, nullptr, nullptr);
    Bytes in(bytes.size());
    std::size_t got = 0;
    for (ssize_t n; got < in.size() && (n = ::recv(fd, in.data() + got, in.size() - got, 0)) > 0;) got += n;
    ::close(fd);
  });
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  for (std::size_t sent = 0; sent < bytes.size();) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  reader.join();
  double s = bench::seconds_since(start);
  ::close(fd);
  ::close(listener);
  return s;
}

int fail(const std::string& what, const Error& e) {
  std::cerr << "bench_protocol: " << what << ": " << e.message << "\n";
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Report report(argc, argv);
  const std::size_t floats = std::size_t{16} << 20;  // 64 MiB of weights
  auto catalog = std::make_shared<testing::MemoryCatalog>(floats);
  catalog->add_epoch();
  SnapshotRequest request;
  request.epoch = 0;
  request.root = catalog->root(0);
  request.codec = comp::Codec::kRaw;  // the same bytes as the copy: transfer, not compression
  auto container = catalog->container({0, comp::Codec::kRaw, std::nullopt});
  if (!container.ok()) return fail("encoding the snapshot", container.error());
  const double mb = static_cast<double>((*container)->size()) / 1e6;

  auto keydir = std::filesystem::temp_directory_path() / ("vt-bench-protocol-" + std::to_string(::getpid()));
  std::filesystem::remove_all(keydir);
  auto identity = generate_identity(keydir);
  if (!identity.ok()) return fail("making a TLS identity", identity.error());
  KeyFiles keys = KeyFiles::in(keydir);

  auto serve = [&](bool insecure) {
    ServerConfig config;
    config.insecure = insecure;
    config.tls_cert = keys.tls_cert;
    config.tls_key = keys.tls_key;
    config.token = "bench";
    return Server::start(config, catalog);
  };
  auto measure = [&](bool insecure, bool decode, double& seconds) -> Status {
    VT_ASSIGN_OR_RETURN(auto server, serve(insecure));
    ClientConfig config;
    config.port = server->endpoint().port;
    config.token = "bench";
    config.insecure = insecure;
    if (!insecure) config.pin_sha256 = identity->tls_cert_fingerprint;
    VT_ASSIGN_OR_RETURN(Client client, Client::connect(config));
    Status status;
    seconds = bench::best_seconds(3, [&] {
      auto got = decode ? client.get_snapshot(request) : client.fetch_container(request);
      if (!got.ok()) status = got.error();
    });
    return status;
  };

  double tls = 0, plain = 0, verified = 0;
  if (auto s = measure(false, false, tls); !s.ok()) return fail("TLS transfer", s.error());
  if (auto s = measure(true, false, plain); !s.ok()) return fail("plain TCP transfer", s.error());
  if (auto s = measure(false, true, verified); !s.ok()) return fail("verified transfer", s.error());
  double copy = 1e300;
  for (int i = 0; i < 3; ++i) copy = std::min(copy, tcp_copy_seconds(**container));
  std::filesystem::remove_all(keydir);

  report.add("container_mb", mb);
  report.add("tls_mb_per_s", mb / tls);
  report.add("plain_mb_per_s", mb / plain);
  report.add("tcp_copy_mb_per_s", mb / copy);
  report.add("tls_vs_tcp_ratio", copy / tls);
  report.add("verified_mb_per_s", mb / verified);
  report.add("threads", std::thread::hardware_concurrency());
  return 0;
}

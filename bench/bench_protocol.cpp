// Snapshot transfer over loopback: the protocol over TLS 1.3 against a plain TCP copy of the same
// container bytes, measured in the same run. The three transfers take turns, round after round,
// so that load from other processes on a shared machine falls on all of them alike; each figure
// is its best round.
//
//   tls_mb_per_s         Client::fetch_container over TLS
//   plain_mb_per_s       the same call with the server in --insecure (plain TCP) mode
//   tcp_copy_mb_per_s    the baseline: one send() stream of the bytes into a reader thread
//   tls_vs_tcp_ratio     tls_mb_per_s / tcp_copy_mb_per_s (goal >= 0.8)
//   tls_vs_tcp_ratio_median  the median over rounds of the TLS/copy ratio within one round
//   plain_vs_tcp_ratio   plain_mb_per_s / tcp_copy_mb_per_s: what the protocol itself costs
//   tls_cpu_vs_tcp_cpu   CPU seconds (all threads) of the TLS transfer over those of the copy
//   plain_cpu_vs_tcp_cpu the same for the plain transfer
//   verified_mb_per_s    Client::get_snapshot: transfer, decode and Merkle root check

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "protocol/keys.h"
#include "protocol/net/client.h"
#include "protocol/net/server.h"
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
    // Received into the same kind of buffer as the client's (huge pages where the kernel gives
    // them), so the ratio compares the transfers rather than page-fault counts.
    Bytes in;
    reserve_large(in, bytes.size());
    in.resize(bytes.size());
    std::size_t got = 0;
    for (ssize_t n; got < in.size() && (n = ::recv(fd, in.data() + got, in.size() - got, 0)) > 0;)
      got += n;
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

// CPU seconds of the whole process (every thread, user and kernel): what a transfer costs,
// which on two shared cores says more than its wall time does.
double process_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto s = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return s(usage.ru_utime) + s(usage.ru_stime);
}

int fail(const std::string& what, const Error& e) {
  std::cerr << "bench_protocol: " << what << ": " << e.message << "\n";
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_protocol: TLS transfer speed against plain TCP and a memory copy"};
  if (auto stop = vt::bench::parse_flags(app, argc, argv)) return *stop;
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

  auto keydir =
      std::filesystem::temp_directory_path() / ("vt-bench-protocol-" + std::to_string(::getpid()));
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
  struct Side {
    std::unique_ptr<Server> server;
    std::optional<Client> client;
    double best = 1e300;
    double best_cpu = 1e300;
  };
  auto open = [&](bool insecure, Side& side) -> Status {
    VT_ASSIGN_OR_RETURN(side.server, serve(insecure));
    ClientConfig config;
    config.port = side.server->endpoint().port;
    config.token = "bench";
    config.insecure = insecure;
    if (!insecure) config.pin_sha256 = identity->tls_cert_fingerprint;
    VT_ASSIGN_OR_RETURN(Client client, Client::connect(config));
    side.client.emplace(std::move(client));
    return {};
  };
  auto timed = [&](Side& side, bool decode) -> Result<double> {
    double cpu = process_cpu_seconds();
    auto start = std::chrono::steady_clock::now();
    auto got = decode ? side.client->get_snapshot(request) : side.client->fetch_container(request);
    double s = bench::seconds_since(start);
    if (!got.ok()) return got.error();
    side.best = std::min(side.best, s);
    side.best_cpu = std::min(side.best_cpu, process_cpu_seconds() - cpu);
    return s;
  };

  Side tls, plain;
  if (auto s = open(false, tls); !s.ok()) return fail("TLS connection", s.error());
  if (auto s = open(true, plain); !s.ok()) return fail("plain TCP connection", s.error());
  constexpr int kRounds = 7;
  double copy = 1e300, copy_cpu = 1e300;
  std::vector<double> ratios;
  for (int round = 0; round < kRounds; ++round) {
    auto t = timed(tls, false);
    if (!t.ok()) return fail("TLS transfer", t.error());
    if (auto p = timed(plain, false); !p.ok()) return fail("plain TCP transfer", p.error());
    double cpu = process_cpu_seconds();
    double c = tcp_copy_seconds(**container);
    copy = std::min(copy, c);
    copy_cpu = std::min(copy_cpu, process_cpu_seconds() - cpu);
    ratios.push_back(c / *t);
  }
  std::sort(ratios.begin(), ratios.end());
  Side verified;
  verified.client = std::move(tls.client);
  for (int round = 0; round < 3; ++round)
    if (auto v = timed(verified, true); !v.ok()) return fail("verified transfer", v.error());
  std::filesystem::remove_all(keydir);

  report.add("container_mb", mb);
  report.add("tls_mb_per_s", mb / tls.best);
  report.add("plain_mb_per_s", mb / plain.best);
  report.add("tcp_copy_mb_per_s", mb / copy);
  report.add("tls_vs_tcp_ratio", copy / tls.best);
  report.add("tls_vs_tcp_ratio_median", ratios[ratios.size() / 2]);
  report.add("plain_vs_tcp_ratio", copy / plain.best);
  report.add("tls_cpu_vs_tcp_cpu", tls.best_cpu / copy_cpu);
  report.add("plain_cpu_vs_tcp_cpu", plain.best_cpu / copy_cpu);
  report.add("verified_mb_per_s", mb / verified.best);
  report.add("threads", std::thread::hardware_concurrency());
  return 0;
}

// Ranks over c10d: TCPStore rendezvous, ProcessGroupGloo point-to-point for the tree exchange.
// Compiled with USE_C10D_GLOO (training/CMakeLists.txt): without it the Gloo header is empty.
// Where CMake finds no gloo headers (the CUDA wheels ship none) VT_HAVE_GLOO is 0 and a run of
// several ranks is refused with that reason; one rank needs none of this.
#include "training/distributed.h"

#if VT_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "training/internal/tree_reduce.h"

namespace vt::training {

struct Collective::Impl {
  DistributedOptions options;
#if VT_HAVE_GLOO
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  std::uint64_t agreements = 0;  // every rank agrees in the same order: keys stay in step
  at::Tensor scratch;            // the reduce-scatter's receive buffer, kept between steps
#endif
};

namespace {

// A failed exchange with one known peer, so that the message can name it.
struct PeerFailure : std::runtime_error {
  PeerFailure(int peer, const std::string& what) : std::runtime_error(what), peer(peer) {}
  int peer;
};

template <typename F>
Status guard(const std::string& what, int peer, std::chrono::milliseconds timeout, F&& fn) {
  try {
    fn();
    return {};
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (auto cut = msg.find("\nException raised from"); cut != std::string::npos) msg.resize(cut);
    if (const auto* p = dynamic_cast<const PeerFailure*>(&e)) peer = p->peer;
    std::string who = peer >= 0 ? "rank " + std::to_string(peer) : "the other ranks";
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", static_cast<double>(timeout.count()) / 1000.0);
    return io_error(what + ": " + who + " did not answer within " + secs + " s or left the run (" +
                    msg + "); stopping");
  }
}

template <typename F>
void with_peer(int peer, F&& fn) {
  try {
    fn();
  } catch (const PeerFailure&) {
    throw;
  } catch (const std::exception& e) {
    throw PeerFailure(peer, e.what());
  }
}

Result<int> env_int(const char* name, int min, int max) {
  const char* v = std::getenv(name);
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || n < min || n > max) {
    return invalid_input(std::string(name) + "=\"" + v + "\": expected an integer in [" +
                         std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return static_cast<int>(n);
}

#if VT_HAVE_GLOO
std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_addr) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  // A one-machine run talks over loopback whatever the host name resolves to.
  if (master_addr == "localhost" || master_addr.rfind("127.", 0) == 0) {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// Sends `out` to and receives `in` from `peer` at once: both sides of a pair do the same, so
// neither waits for the other to finish sending first.
// In chunks, as exchange_add below: several messages in flight keep both directions busy.
void exchange(Collective::Impl& c, const at::Tensor& out, at::Tensor& in, int peer, int tag) {
  constexpr std::int64_t kChunk = std::int64_t{1} << 18;
  const std::int64_t chunks = (std::max(out.numel(), in.numel()) + kChunk - 1) / kChunk;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (std::int64_t k = 0; k < chunks; ++k) {
    const std::int64_t lo = k * kChunk;
    if (lo < out.numel()) {
      std::vector<at::Tensor> t{out.narrow(0, lo, std::min(kChunk, out.numel() - lo))};
      works.push_back(c.group->send(t, peer, tag + static_cast<int>(k)));
    }
    if (lo < in.numel()) {
      std::vector<at::Tensor> t{in.narrow(0, lo, std::min(kChunk, in.numel() - lo))};
      works.push_back(c.group->recv(t, peer, tag + static_cast<int>(k)));
    }
  }
  for (auto& w : works) w->wait(c.options.timeout);
}

// One reduce-scatter level: `give` goes to `peer`, whose copy of `keep` is added into `keep`.
// In chunks, all posted at once, so that adding one chunk overlaps receiving the next.
// `scratch` is reused across steps: a fresh receive buffer would fault in every page anew.
void exchange_add(Collective::Impl& c, const at::Tensor& give, const at::Tensor& keep,
                  at::Tensor& scratch, int peer, int level) {
  constexpr std::int64_t kChunk = std::int64_t{1} << 18;  // 1 MiB of floats
  const std::int64_t n = keep.numel();
  if (scratch.numel() < n || scratch.scalar_type() != keep.scalar_type())
    scratch = at::empty({n}, keep.options());
  const std::int64_t chunks = (std::max(give.numel(), n) + kChunk - 1) / kChunk;
  std::vector<c10::intrusive_ptr<c10d::Work>> sends, recvs;
  for (std::int64_t k = 0; k < chunks; ++k) {
    const int tag = level * (1 << 20) + static_cast<int>(k);
    const std::int64_t lo = k * kChunk;
    if (lo < give.numel()) {
      std::vector<at::Tensor> t{give.narrow(0, lo, std::min(kChunk, give.numel() - lo))};
      sends.push_back(c.group->send(t, peer, tag));
    }
    if (lo < n) {
      std::vector<at::Tensor> t{scratch.narrow(0, lo, std::min(kChunk, n - lo))};
      recvs.push_back(c.group->recv(t, peer, tag));
    }
  }
  for (std::size_t k = 0; k < recvs.size(); ++k) {
    recvs[k]->wait(c.options.timeout);
    const std::int64_t lo = static_cast<std::int64_t>(k) * kChunk;
    const std::int64_t len = std::min(kChunk, n - lo);
    // Left + right of one tree node; IEEE addition commutes, so either rank's order is the node.
    keep.narrow(0, lo, len).add_(scratch.narrow(0, lo, len));
  }
  for (auto& w : sends) w->wait(c.options.timeout);
}

void tree_allreduce_host(Collective::Impl& c, at::Tensor& flat) {
  const int rank = c.options.rank;
  const int world = c.options.world_size;
  std::vector<std::pair<std::int64_t, std::int64_t>> spans;  // [lo, hi) before each level's split
  std::int64_t lo = 0, hi = flat.numel();
  int level = 0;
  for (int bit = 1; bit < world; bit <<= 1, ++level) {
    const bool left = (rank & bit) == 0;
    const std::int64_t mid = lo + (hi - lo) / 2;
    const std::int64_t keep_lo = left ? lo : mid, keep_hi = left ? mid : hi;
    const std::int64_t give_lo = left ? mid : lo, give_hi = left ? hi : mid;
    with_peer(rank ^ bit, [&] {
      exchange_add(c, flat.narrow(0, give_lo, give_hi - give_lo),
                   flat.narrow(0, keep_lo, keep_hi - keep_lo), c.scratch, rank ^ bit, level);
    });
    spans.emplace_back(lo, hi);
    lo = keep_lo;
    hi = keep_hi;
  }
  for (int l = level - 1; l >= 0; --l) {
    const auto [parent_lo, parent_hi] = spans[static_cast<std::size_t>(l)];
    const std::int64_t other_lo = lo == parent_lo ? hi : parent_lo;
    const std::int64_t other_hi = lo == parent_lo ? parent_hi : lo;
    at::Tensor into = flat.narrow(0, other_lo, other_hi - other_lo);
    with_peer(rank ^ (1 << l), [&] {
      exchange(c, flat.narrow(0, lo, hi - lo), into, rank ^ (1 << l), (64 + l) * (1 << 20));
    });
    lo = parent_lo;
    hi = parent_hi;
  }
}

#endif  // VT_HAVE_GLOO

constexpr const char* kNoGloo =
    "this build has no c10d Gloo (libgloo-dev's headers were not found when it was configured): it "
    "trains on one rank only";

}  // namespace

Status read_distributed_env(DistributedOptions& o) {
  if (std::getenv("RANK")) {
    VT_ASSIGN_OR_RETURN(o.rank, env_int("RANK", 0, 1 << 20));
  }
  if (std::getenv("WORLD_SIZE")) {
    VT_ASSIGN_OR_RETURN(o.world_size, env_int("WORLD_SIZE", 1, 1 << 20));
  }
  if (std::getenv("MASTER_PORT")) {
    VT_ASSIGN_OR_RETURN(o.master_port, env_int("MASTER_PORT", 1, 65535));
  }
  if (const char* addr = std::getenv("MASTER_ADDR"); addr && *addr) o.master_addr = addr;
  return {};
}

void tree_allreduce(Collective& collective, at::Tensor& flat) {
  if (collective.world_size() == 1) return;
#if !VT_HAVE_GLOO
  (void)flat;
  throw std::runtime_error(kNoGloo);
#else
  Status st = guard("exchanging gradients", -1, collective.timeout(), [&] {
    if (flat.is_cuda()) {
      at::Tensor host = flat.to(at::kCPU);
      tree_allreduce_host(collective.impl(), host);
      flat.copy_(host);
      return;
    }
    tree_allreduce_host(collective.impl(), flat);
  });
  if (!st) throw std::runtime_error(st.error().message);
#endif
}

Collective::Collective(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Collective::~Collective() = default;
int Collective::rank() const { return impl_->options.rank; }
int Collective::world_size() const { return impl_->options.world_size; }
std::chrono::milliseconds Collective::timeout() const { return impl_->options.timeout; }

Result<std::shared_ptr<Collective>> Collective::connect(const DistributedOptions& o) {
  const int w = o.world_size;
  if (w < 1 || (w & (w - 1)) != 0)
    return invalid_input("world size " + std::to_string(w) + ": expected a power of two");
  if (o.rank < 0 || o.rank >= w) {
    return invalid_input("rank " + std::to_string(o.rank) + ": expected 0 ... " +
                         std::to_string(w - 1));
  }
  if (o.master_port < 1 || o.master_port > 65535) {
    return invalid_input("master port " + std::to_string(o.master_port) + ": expected 1 ... 65535");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = o;
  if (w == 1) return std::shared_ptr<Collective>(new Collective(std::move(impl)));
#if !VT_HAVE_GLOO
  return invalid_input(kNoGloo);
#else
  Status st = guard("joining the run at " + o.master_addr + ":" + std::to_string(o.master_port), -1,
                    o.timeout, [&] {
                      c10d::TCPStoreOptions so;
                      so.port = static_cast<std::uint16_t>(o.master_port);
                      so.isServer = o.rank == 0;
                      so.numWorkers = static_cast<std::size_t>(w);
                      so.waitWorkers = true;
                      so.timeout = o.timeout;
                      impl->store = c10::make_intrusive<c10d::TCPStore>(o.master_addr, so);
                      auto go = c10d::ProcessGroupGloo::Options::create(o.timeout);
                      go->devices.push_back(gloo_device(o.master_addr));
                      go->threads = 2;
                      impl->group =
                          c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, o.rank, w, go);
                    });
  if (!st.ok()) return st.error();
  return std::shared_ptr<Collective>(new Collective(std::move(impl)));
#endif
}

Status Collective::agree(const std::string& what, const Digest& mine) {
  const int w = world_size();
  if (w == 1) return {};
#if !VT_HAVE_GLOO
  (void)what;
  (void)mine;
  return internal_error(kNoGloo);
#else
  Impl& c = *impl_;
  const std::string prefix = "agree/" + std::to_string(c.agreements++) + "/";
  std::vector<Digest> all(static_cast<std::size_t>(w));
  VT_RETURN_IF_ERROR(guard("comparing " + what, -1, c.options.timeout, [&] {
    c.store->set(prefix + std::to_string(rank()),
                 std::vector<std::uint8_t>(mine.begin(), mine.end()));
    for (int r = 0; r < w; ++r) {
      std::vector<std::uint8_t> v = c.store->get(prefix + std::to_string(r));
      if (v.size() == all[0].size())
        std::memcpy(all[static_cast<std::size_t>(r)].data(), v.data(), v.size());
    }
  }));
  std::string differ;
  for (int r = 1; r < w; ++r) {
    if (all[static_cast<std::size_t>(r)] != all[0]) {
      differ +=
          "; rank " + std::to_string(r) + " holds " + hex_encode(all[static_cast<std::size_t>(r)]);
    }
  }
  if (differ.empty()) return {};
  return internal_error("the ranks disagree on " + what + ": rank 0 holds " + hex_encode(all[0]) +
                        differ + " (nondeterminism or a faulty rank); stopping");
#endif
}

Status Collective::broadcast(Bytes& bytes, std::uint64_t limit) {
  if (world_size() == 1) return {};
#if !VT_HAVE_GLOO
  (void)bytes;
  (void)limit;
  return internal_error(kNoGloo);
#else
  Impl& c = *impl_;
  const std::string key = "broadcast/" + std::to_string(c.agreements++);
  std::int64_t size = static_cast<std::int64_t>(bytes.size());
  Status got = guard("receiving rank 0's state", 0, c.options.timeout, [&] {
    if (rank() == 0) {
      std::vector<std::uint8_t> v(8);
      std::memcpy(v.data(), &size, 8);
      c.store->set(key, v);
    } else {
      std::vector<std::uint8_t> v = c.store->get(key);
      if (v.size() != 8) throw std::runtime_error("malformed size under " + key);
      std::memcpy(&size, v.data(), 8);
    }
  });
  if (!got) return got;
  if (rank() != 0) {
    // Bounded before the allocation: not the peer-timeout message guard() would give.
    if (size < 0 || static_cast<std::uint64_t>(size) > limit) {
      return io_error("receiving rank 0's state: the store announces " + std::to_string(size) +
                      " bytes under " + key + ", outside 0 ... " + std::to_string(limit) +
                      "; stopping");
    }
    bytes.resize(static_cast<std::size_t>(size));
  }
  return guard("receiving rank 0's state", 0, c.options.timeout, [&] {
    if (size == 0) return;
    at::Tensor t = at::from_blob(bytes.data(), {size}, at::kByte);
    std::vector<at::Tensor> ts{t};
    c10d::BroadcastOptions bo;
    bo.rootRank = 0;
    c.group->broadcast(ts, bo)->wait(c.options.timeout);
  });
#endif
}

Status Collective::finish() {
  if (world_size() == 1) return {};
#if !VT_HAVE_GLOO
  return internal_error(kNoGloo);
#else
  Impl& c = *impl_;
  return guard("finishing the run", -1, c.options.timeout, [&] {
    if (rank() != 0) {
      c.store->set("finished/" + std::to_string(rank()), {1});
      return;
    }
    std::vector<std::string> keys;
    for (int r = 1; r < world_size(); ++r) keys.push_back("finished/" + std::to_string(r));
    c.store->wait(keys, c.options.timeout);
  });
#endif
}

Status Collective::tree_allreduce(std::span<float> values) {
  if (world_size() == 1) return {};
#if !VT_HAVE_GLOO
  (void)values;
  return internal_error(kNoGloo);
#else
  at::Tensor t =
      at::from_blob(values.data(), {static_cast<std::int64_t>(values.size())}, at::kFloat);
  return guard("tree all-reduce", -1, timeout(), [&] { tree_allreduce_host(*impl_, t); });
#endif
}

Status Collective::gloo_allreduce(std::span<float> values) {
  if (world_size() == 1) return {};
#if !VT_HAVE_GLOO
  (void)values;
  return internal_error(kNoGloo);
#else
  at::Tensor t =
      at::from_blob(values.data(), {static_cast<std::int64_t>(values.size())}, at::kFloat);
  return guard("Gloo all-reduce", -1, timeout(), [&] {
    std::vector<at::Tensor> ts{t};
    impl_->group->allreduce(ts)->wait(timeout());
  });
#endif
}

}  // namespace vt::training

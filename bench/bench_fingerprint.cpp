// Merkle throughput against OpenSSL's own SHA-256 on the same bytes, and the cost of a
// fingerprint of a 100M-element snapshot from its canonical bytes.
//
//   merkle_vs_openssl_ratio   one-thread merkle_root GB/s over `openssl dgst -sha256` GB/s on a
//                             file of the same bytes (its process start, timed on an empty file,
//                             is subtracted); goal >= 0.9
//   merkle_vs_evp_ratio       the same against one in-process EVP SHA-256 over the whole buffer
//   merkle_gb_s_all_threads   merkle_root on a pool of every hardware thread
//   fingerprint_ms_100m       parse + plan + gather, k = 1024, root given; goal < 5

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "bench/bench_util.h"
#include "common/sha256.h"
#include "common/thread_pool.h"
#include "fingerprint/fingerprint.h"
#include "fingerprint/merkle.h"

namespace {

using vt::bench::best_seconds;

constexpr std::uint64_t kElements = 100'000'000;
constexpr std::uint64_t kK = 1024;

// A canonical snapshot shaped like a model: ten 10M-element F32 matrices, each with a bias.
vt::Bytes make_snapshot() {
  std::vector<vt::TensorSpec> specs;
  for (int i = 0; i < 10; ++i) {
    specs.push_back(
        {"layer" + std::to_string(i) + ".weight", vt::DType::kF32, {10'000, kElements / 100'000}});
    specs.push_back({"layer" + std::to_string(i) + ".bias", vt::DType::kF32, {10'000}});
  }
  auto layout = vt::plan_canonical(specs, {}).value();
  vt::Bytes out(layout.total_size);
  std::copy(layout.prefix.begin(), layout.prefix.end(), out.begin());
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (std::size_t i = layout.prefix.size(); i + 8 <= out.size(); i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    vt::put_u64le(out.data() + i, x);
  }
  return out;
}

// Best wall time of `openssl dgst -sha256 path`, or a negative number if it cannot run.
double openssl_cli_seconds(const std::string& path) {
  const std::string cmd = "openssl dgst -sha256 '" + path + "' >/dev/null 2>&1";
  int rc = 0;
  double t = best_seconds(3, [&] { rc = std::system(cmd.c_str()); });
  return rc == 0 ? t : -1.0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_fingerprint: Merkle root and fingerprint speed against OpenSSL's SHA-256"};
  if (auto stop = vt::bench::parse_flags(app, argc, argv)) return *stop;
  vt::bench::Report report(argc, argv);
  const vt::Bytes snapshot = make_snapshot();
  const double gb = static_cast<double>(snapshot.size()) / 1e9;
  report.add("bytes", snapshot.size());

  vt::Digest sink{};
  const double evp = best_seconds(3, [&] { sink = vt::sha256(snapshot); });
  const double merkle1 = best_seconds(3, [&] { sink = vt::fp::merkle_root(snapshot); });
  report.add("evp_sha256_gb_s", gb / evp);
  report.add("merkle_gb_s_one_thread", gb / merkle1);
  report.add("merkle_vs_evp_ratio", evp / merkle1);

  const auto dir = std::filesystem::temp_directory_path();
  const std::string data_path =
      (dir / ("vt-bench-fp-" + std::to_string(::getpid()) + ".bin")).string();
  const std::string empty_path = data_path + ".empty";
  {
    std::ofstream(data_path, std::ios::binary)
        .write(reinterpret_cast<const char*>(snapshot.data()),
               static_cast<std::streamsize>(snapshot.size()));
    std::ofstream(empty_path, std::ios::binary);
  }
  const double cli = openssl_cli_seconds(data_path);
  const double cli_start = openssl_cli_seconds(empty_path);
  std::filesystem::remove(data_path);
  std::filesystem::remove(empty_path);
  if (cli > 0 && cli_start >= 0 && cli > cli_start) {
    report.add("openssl_cli_gb_s", gb / (cli - cli_start));
    report.add("merkle_vs_openssl_ratio", (cli - cli_start) / merkle1);
  } else {
    report.add("merkle_vs_openssl_ratio", nullptr);  // no openssl binary: say so, never invent
  }

  const std::size_t threads = vt::hardware_threads();
  vt::ThreadPool pool(threads > 1 ? threads - 1 : 1);  // parallel_for also runs on the caller
  const double merkle_all = best_seconds(3, [&] { sink = vt::fp::merkle_root(snapshot, &pool); });
  report.add("threads", threads);
  report.add("merkle_gb_s_all_threads", gb / merkle_all);

  const vt::Digest root = sink;
  vt::Digest task{};
  const double fp = best_seconds(5, [&] {
    auto view = vt::parse_safetensors(snapshot).value();
    auto f = vt::fp::fingerprint_snapshot(view, vt::fp::commitment_seed(task, 1, root), kK).value();
    sink[0] ^= f.values[0][0];
  });
  report.add("fingerprint_k", kK);
  report.add("fingerprint_ms_100m", fp * 1e3);
  volatile std::uint8_t observed = sink[0];  // keeps the hashing from being optimised away
  (void)observed;
  return 0;
}

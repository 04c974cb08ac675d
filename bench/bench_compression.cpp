// bench_compression: ratio and per-core throughput of the snapshot container on a synthetic
// transformer-shaped training state (or on real snapshots), with plain zstd-3 and xz-6 measured in
// the same run. Usage:
//   bench_compression [--json] [--params N] [--rel-update R] [--xz-sample-mb M]
//   bench_compression [--json] --snapshot BEFORE.safetensors [--after AFTER.safetensors]
// (a real pair is reported under pair_*; pair_dense/pair_sparse are the synthetic scenarios)
// The synthetic state (docs/benchmarks.md) is weights ~ N(0, 0.02) with transformer shapes, and
// Adam exp_avg / exp_avg_sq at gradient scale with a per-element spread. "After one epoch" adds a
// dense update of relative size R to every float entry; the sparse variant changes ~20%.

#include <lzma.h>
#include <zstd.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>

#include "bench/bench_util.h"
#include "common/file_io.h"
#include "common/safetensors.h"
#include "compression/container.h"

namespace {

using vt::Bytes;
using vt::ByteSpan;

class Rng {  // xoshiro256**, seeded by splitmix64: fast and the same on every platform
 public:
  explicit Rng(std::uint64_t seed) {
    for (auto& x : s_) {
      seed += 0x9E3779B97F4A7C15ull;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      x = z ^ (z >> 31);
    }
  }
  std::uint64_t next() {
    std::uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double normal() {  // Box-Muller; the spare value is kept
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    double u = uniform(), v = uniform();
    double r = std::sqrt(-2.0 * std::log(u + 1e-300));
    spare_ = r * std::sin(2 * M_PI * v);
    have_spare_ = true;
    return r * std::cos(2 * M_PI * v);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
  double spare_ = 0;
  bool have_spare_ = false;
};

struct Tensor {
  std::string name;
  vt::DType dtype = vt::DType::kF32;
  std::vector<std::int64_t> shape;
  std::vector<float> f;  // F32 tensors
  Bytes raw;             // other dtypes
};

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// A GPT-shaped parameter set of about `params` parameters: embeddings, then per layer qkv, proj,
// two MLP matrices, their biases and two layer norms.
std::vector<Tensor> model_shapes(std::int64_t params) {
  std::int64_t d = params < 20'000'000 ? 256 : params < 200'000'000 ? 512 : 1024;
  // The embedding takes about a quarter of the parameters, as in small GPTs.
  std::int64_t vocab = std::max<std::int64_t>(256, params / 4 / d), ctx = 1024;
  std::int64_t per_layer = 12 * d * d + 13 * d;
  std::int64_t layers = std::max<std::int64_t>(1, (params - vocab * d - ctx * d) / per_layer);
  std::vector<Tensor> t;
  auto add = [&](std::string name, std::vector<std::int64_t> shape) {
    t.push_back({std::move(name), vt::DType::kF32, std::move(shape), {}, {}});
  };
  add("wte.weight", {vocab, d});
  add("wpe.weight", {ctx, d});
  for (std::int64_t l = 0; l < layers; ++l) {
    std::string p = "h." + std::to_string(l) + ".";
    add(p + "attn.qkv.weight", {3 * d, d});
    add(p + "attn.qkv.bias", {3 * d});
    add(p + "attn.proj.weight", {d, d});
    add(p + "attn.proj.bias", {d});
    add(p + "mlp.fc.weight", {4 * d, d});
    add(p + "mlp.fc.bias", {4 * d});
    add(p + "mlp.proj.weight", {d, 4 * d});
    add(p + "mlp.proj.bias", {d});
    for (const char* ln : {"ln1", "ln2"}) {
      add(p + ln + ".weight", {d});
      add(p + ln + ".bias", {d});
    }
  }
  add("ln_f.weight", {d});
  add("ln_f.bias", {d});
  return t;
}

// Weights, Adam moments, a step counter and an RNG state: what a snapshot holds.
std::vector<Tensor> synthetic_state(std::int64_t params, Rng& rng) {
  std::vector<Tensor> model = model_shapes(params), state;
  for (Tensor& w : model) {
    std::int64_t n = numel(w.shape);
    bool is_ln = w.name.find(".ln") != std::string::npos || w.name.rfind("ln_f", 0) == 0;
    bool is_weight = w.name.size() > 7 && w.name.compare(w.name.size() - 7, 7, ".weight") == 0;
    double sigma = is_weight ? 0.02 : 0.01;
    double grad = 1e-3 * std::exp(rng.normal());  // each tensor has its own gradient scale
    Tensor m{"optim.exp_avg." + w.name, vt::DType::kF32, w.shape, {}, {}};
    Tensor v{"optim.exp_avg_sq." + w.name, vt::DType::kF32, w.shape, {}, {}};
    w.f.resize(n);
    m.f.resize(n);
    v.f.resize(n);
    for (std::int64_t i = 0; i < n; ++i) {
      w.f[i] = static_cast<float>((is_ln && is_weight ? 1.0 : 0.0) + sigma * rng.normal());
      double g = grad * std::exp(0.5 * rng.normal());  // per-element gradient scale
      m.f[i] = static_cast<float>(0.25 * g * rng.normal());
      v.f[i] = static_cast<float>(g * g * std::exp(0.1 * rng.normal()));
    }
    state.push_back(std::move(w));
    state.push_back(std::move(m));
    state.push_back(std::move(v));
  }
  Tensor step{"optim.step", vt::DType::kI64, {1}, {}, Bytes(8, 0)};
  step.raw[0] = 100;
  Tensor cpu_rng{"rng.cpu", vt::DType::kU8, {5056}, {}, Bytes(5056)};
  for (auto& b : cpu_rng.raw) b = static_cast<std::uint8_t>(rng.next());
  state.push_back(std::move(step));
  state.push_back(std::move(cpu_rng));
  return state;
}

// Every float entry (or each with probability `fraction`) moves by N(0, rel · tensor rms).
std::vector<Tensor> updated(std::vector<Tensor> s, double rel, double fraction, Rng& rng) {
  for (Tensor& t : s) {
    if (t.dtype == vt::DType::kI64) t.raw[0] += 1;
    if (t.dtype != vt::DType::kF32) continue;
    double sq = 0;
    for (float x : t.f) sq += double(x) * x;
    double rms = std::sqrt(sq / std::max<std::size_t>(1, t.f.size()));
    for (float& x : t.f) {
      if (fraction < 1 && rng.uniform() >= fraction) continue;
      x = static_cast<float>(x + rel * rms * rng.normal());
    }
  }
  return s;
}

// A harsher epoch: weights move by 1e-3 · rms, exp_avg (beta1 = 0.9 forgets within ~10 steps) is
// half replaced by new gradient noise, exp_avg_sq (beta2 = 0.999) is re-estimated within ~10%.
std::vector<Tensor> epoch_later(std::vector<Tensor> s, Rng& rng) {
  s = updated(std::move(s), 1e-3, 1.0, rng);
  for (Tensor& t : s) {
    if (t.name.rfind("optim.exp_avg.", 0) == 0) {
      for (float& x : t.f)
        x = static_cast<float>(0.5 * x + 0.5 * std::fabs(x) * rng.normal() + 1e-9 * rng.normal());
    } else if (t.name.rfind("optim.exp_avg_sq.", 0) == 0) {
      for (float& x : t.f) x = static_cast<float>(x * std::exp(0.1 * rng.normal()));
    }
  }
  return s;
}

Bytes canonical(const std::vector<Tensor>& s) {
  std::vector<vt::TensorData> data;
  for (const Tensor& t : s) {
    ByteSpan b = t.dtype == vt::DType::kF32
                     ? ByteSpan(reinterpret_cast<const std::uint8_t*>(t.f.data()), t.f.size() * 4)
                     : ByteSpan(t.raw);
    data.push_back({{t.name, t.dtype, t.shape}, b});
  }
  auto out = vt::write_canonical(data, {{"format", "veritrain-bench"}});
  if (!out.ok()) {
    std::cerr << out.error().message << "\n";
    std::exit(2);
  }
  return std::move(out).value();
}

template <typename T>
T must(vt::Result<T> r, const char* what) {
  if (!r.ok()) {
    std::cerr << what << ": " << r.error().message << "\n";
    std::exit(2);
  }
  return std::move(r).value();
}

double ratio(double raw, double coded) { return std::round(raw / coded * 1000) / 1000; }
double mb_s(double bytes, double s) { return std::round(bytes / s / 1e6); }

}  // namespace

int main(int argc, char** argv) {
  std::int64_t params = 8'000'000;
  double rel = 1e-4;
  double xz_sample_mb = 32;
  std::string snapshot_file, after_file_name;
  CLI::App app{"bench_compression: container ratio and per-core speed against zstd and xz"};
  app.add_option("--params", params, "Parameters of the synthetic state")
      ->check(CLI::PositiveNumber);
  app.add_option("--rel-update", rel, "Relative size of the synthetic update")
      ->check(CLI::PositiveNumber);
  app.add_option("--xz-sample-mb", xz_sample_mb, "Megabytes xz compresses (it is slow)")
      ->check(CLI::PositiveNumber);
  app.add_option("--snapshot", snapshot_file, "A real snapshot instead of the synthetic state")
      ->check(CLI::ExistingFile);
  app.add_option("--after", after_file_name, "The snapshot after it, for the pair figures")
      ->check(CLI::ExistingFile);
  if (auto stop = vt::bench::parse_flags(app, argc, argv)) return *stop;
  const char* snapshot = snapshot_file.empty() ? nullptr : snapshot_file.c_str();
  const char* after_file = after_file_name.empty() ? nullptr : after_file_name.c_str();
  vt::bench::Report report(argc, argv);

  Bytes before, dense, sparse, epoch;
  if (snapshot) {
    before = must(vt::read_file(snapshot), snapshot);
    if (after_file) dense = must(vt::read_file(after_file), after_file);
    report.add("input",
               std::string(snapshot) + (after_file ? std::string(" + ") + after_file : ""));
  } else {
    Rng rng(42);
    auto state = synthetic_state(params, rng);
    before = canonical(state);
    dense = canonical(updated(state, rel, 1.0, rng));
    sparse = canonical(updated(state, rel, 0.2, rng));
    epoch = canonical(epoch_later(state, rng));
    report.add("input", "synthetic transformer state, " + std::to_string(params) +
                            " parameters + Adam moments");
    report.add("rel_update", rel);
  }
  report.add("snapshot_bytes", before.size());

  vt::comp::EncodeOptions planes;  // threads = 1: every speed below is per core
  Bytes single;
  double enc_s = vt::bench::best_seconds(
      3, [&] { single = must(vt::comp::encode(before, planes), "encode"); });
  Bytes back;
  double dec_s =
      vt::bench::best_seconds(3, [&] { back = must(vt::comp::decode(single, {}), "decode"); });
  if (back != before) {
    std::cerr << "round trip mismatch\n";
    return 1;
  }
  vt::comp::DecodeOptions no_root;
  no_root.verify_root = false;
  double dec_noroot_s =
      vt::bench::best_seconds(3, [&] { back = must(vt::comp::decode(single, no_root), "decode"); });
  report.add("single_ratio", ratio(before.size(), single.size()));
  report.add("compress_mb_s_per_core", mb_s(before.size(), enc_s));
  report.add("decompress_mb_s_per_core", mb_s(before.size(), dec_s));
  report.add("decompress_no_root_mb_s_per_core", mb_s(before.size(), dec_noroot_s));

  Bytes z(ZSTD_compressBound(before.size()));
  std::size_t zn = 0;
  double z_s = vt::bench::best_seconds(
      1, [&] { zn = ZSTD_compress(z.data(), z.size(), before.data(), before.size(), 3); });
  report.add("zstd3_single_ratio", ratio(before.size(), zn));
  report.add("zstd3_compress_mb_s_per_core", mb_s(before.size(), z_s));

  // xz-6 is slow (a few MB/s on float data), so beyond the sample size it is measured on a prefix.
  std::size_t xz_len =
      std::min<std::size_t>(before.size(), static_cast<std::size_t>(xz_sample_mb * 1e6));
  Bytes x(lzma_stream_buffer_bound(xz_len));
  std::size_t xn = 0;
  lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, nullptr, before.data(), xz_len, x.data(), &xn,
                          x.size());
  report.add("xz6_single_ratio", ratio(xz_len, xn));
  report.add("xz6_sample_bytes", xz_len);

  auto pair = [&](const Bytes& after, const std::string& key) {
    vt::comp::EncodeOptions delta;
    delta.codec = vt::comp::Codec::kDelta;
    delta.base = before;
    Bytes coded;
    double s = vt::bench::best_seconds(
        1, [&] { coded = must(vt::comp::encode(after, delta), "encode delta"); });
    vt::comp::DecodeOptions d;
    d.base = before;
    Bytes restored;
    double ds = vt::bench::best_seconds(
        1, [&] { restored = must(vt::comp::decode(coded, d), "decode delta"); });
    if (restored != after) {
      std::cerr << "delta round trip mismatch\n";
      std::exit(1);
    }
    report.add(key + "_ratio", ratio(before.size() + after.size(), single.size() + coded.size()));
    report.add(key + "_after_ratio", ratio(after.size(), coded.size()));
    report.add(key + "_compress_mb_s_per_core", mb_s(after.size(), s));
    report.add(key + "_decompress_mb_s_per_core", mb_s(after.size(), ds));
    Bytes both = before;
    both.insert(both.end(), after.begin(), after.end());
    Bytes zz(ZSTD_compressBound(both.size()));
    report.add(
        "zstd3_" + key + "_ratio",
        ratio(both.size(), ZSTD_compress(zz.data(), zz.size(), both.data(), both.size(), 3)));
  };
  if (!dense.empty()) pair(dense, snapshot ? "pair" : "pair_dense");
  if (!sparse.empty()) pair(sparse, "pair_sparse");
  if (!epoch.empty()) pair(epoch, "pair_epoch");

  vt::comp::EncodeOptions two = planes;
  two.threads = 2;
  double enc2_s =
      vt::bench::best_seconds(2, [&] { single = must(vt::comp::encode(before, two), "encode"); });
  report.add("compress_mb_s_2_threads", mb_s(before.size(), enc2_s));
  return 0;
}

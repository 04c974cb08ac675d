#include "training/data/data.h"

#include "common/file_io.h"
#include "common/sha256.h"
#include "training/data/gunzip.h"
#include "training/zoo/prng.h"
#include "training/zoo/zoo.h"

namespace vt::training {
namespace fs = std::filesystem;
namespace {

// Streams of the task seed kept apart by purpose, so changing one generator never shifts another.
enum Stream : std::uint64_t { kData = 1, kOrder = 2 };

Dataset blobs(std::uint64_t seed, std::int64_t samples, std::int64_t dim, std::int64_t classes) {
  Prng rng(seed, kData, 1);
  std::vector<float> centers(static_cast<std::size_t>(classes * dim));
  for (float& c : centers) c = 2.0f * rng.normal();
  Dataset d;
  d.size = samples;
  d.input_shape = {dim};
  d.inputs.resize(static_cast<std::size_t>(samples * dim));
  d.class_targets.resize(static_cast<std::size_t>(samples));
  for (std::int64_t i = 0; i < samples; ++i) {
    auto label = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(classes)));
    d.class_targets[static_cast<std::size_t>(i)] = label;
    for (std::int64_t j = 0; j < dim; ++j) {
      d.inputs[static_cast<std::size_t>(i * dim + j)] =
          centers[static_cast<std::size_t>(label * dim + j)] + rng.normal();
    }
  }
  return d;
}

Dataset images(std::uint64_t seed, std::int64_t samples, std::int64_t classes) {
  constexpr std::int64_t kPixels = std::int64_t{3} * 32 * 32;
  Prng rng(seed, kData, 2);
  std::vector<float> templates(static_cast<std::size_t>(classes * kPixels));
  for (float& t : templates) t = rng.normal();
  Dataset d;
  d.size = samples;
  d.input_shape = {3, 32, 32};
  d.inputs.resize(static_cast<std::size_t>(samples * kPixels));
  d.class_targets.resize(static_cast<std::size_t>(samples));
  for (std::int64_t i = 0; i < samples; ++i) {
    auto label = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(classes)));
    d.class_targets[static_cast<std::size_t>(i)] = label;
    for (std::int64_t p = 0; p < kPixels; ++p) {
      d.inputs[static_cast<std::size_t>(i * kPixels + p)] =
          0.5f * templates[static_cast<std::size_t>(label * kPixels + p)] + rng.normal();
    }
  }
  return d;
}

// Target = a box blur of the input along the last axis: something three conv layers can learn.
Dataset volumes(std::uint64_t seed, std::int64_t samples, std::int64_t n) {
  Prng rng(seed, kData, 3);
  const std::int64_t voxels = n * n * n;
  Dataset d;
  d.size = samples;
  d.input_shape = {1, n, n, n};
  d.target_shape = {1, n, n, n};
  d.inputs.resize(static_cast<std::size_t>(samples * voxels));
  d.float_targets.resize(d.inputs.size());
  for (float& v : d.inputs) v = rng.uniform();
  for (std::int64_t i = 0; i < samples * voxels; ++i) {
    std::int64_t x = i % n;
    float left = x > 0 ? d.inputs[static_cast<std::size_t>(i - 1)] : 0.0f;
    float right = x + 1 < n ? d.inputs[static_cast<std::size_t>(i + 1)] : 0.0f;
    d.float_targets[static_cast<std::size_t>(i)] =
        (left + d.inputs[static_cast<std::size_t>(i)] + right) * (1.0f / 3.0f);
  }
  return d;
}

// Sequences from a sparse random Markov chain: each token has four likely successors.
Dataset tokens(std::uint64_t seed, std::int64_t samples, std::int64_t vocab, std::int64_t seq_len) {
  Prng rng(seed, kData, 4);
  auto v = static_cast<std::uint64_t>(vocab);
  std::vector<std::int64_t> successors(static_cast<std::size_t>(vocab * 4));
  for (auto& s : successors) s = static_cast<std::int64_t>(rng.below(v));
  Dataset d;
  d.size = samples;
  d.input_shape = {seq_len};
  d.target_shape = {seq_len};
  d.token_inputs.resize(static_cast<std::size_t>(samples * seq_len));
  d.class_targets.resize(d.token_inputs.size());
  for (std::int64_t i = 0; i < samples; ++i) {
    auto t = static_cast<std::int64_t>(rng.below(v));
    for (std::int64_t j = 0; j <= seq_len; ++j) {
      auto next = rng.below(10) < 9 ? successors[static_cast<std::size_t>(
                                          t * 4 + static_cast<std::int64_t>(rng.below(4)))]
                                    : static_cast<std::int64_t>(rng.below(v));
      if (j < seq_len) d.token_inputs[static_cast<std::size_t>(i * seq_len + j)] = t;
      if (j > 0) d.class_targets[static_cast<std::size_t>(i * seq_len + j - 1)] = t;
      t = next;
    }
  }
  return d;
}

// Reads a pinned file: the whole file, after its SHA-256 matched the task.
Result<Bytes> read_pinned(const Task& task, const fs::path& dir, const std::string& name) {
  auto it = task.dataset.files.find(name);
  if (it == task.dataset.files.end()) {
    return invalid_input("dataset.files: missing \"" + name + "\" and its SHA-256");
  }
  fs::path file = dir / name;
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    return invalid_input("dataset.files: file \"" + name + "\" is missing (looked for " +
                         file.string() + ")");
  }
  VT_ASSIGN_OR_RETURN(Bytes bytes, read_file(file, std::uint64_t{4} << 30));
  std::string actual = hex_encode(sha256(bytes));
  if (actual != it->second) {
    return invalid_input(file.string() + ": SHA-256 is " + actual + ", the task pins " +
                         it->second);
  }
  return bytes;
}

std::uint32_t be32(const Bytes& b, std::size_t at) {
  return std::uint32_t{b[at]} << 24 | std::uint32_t{b[at + 1]} << 16 |
         std::uint32_t{b[at + 2]} << 8 | b[at + 3];
}

// An idx file pinned as itself or as the `.gz` that MNIST is downloaded as.
Result<Bytes> read_idx(const Task& task, const fs::path& dir, const std::string& name) {
  const std::string gz = name + ".gz";
  if (task.dataset.files.count(name) == 0 && task.dataset.files.count(gz) != 0) {
    VT_ASSIGN_OR_RETURN(Bytes packed, read_pinned(task, dir, gz));
    return gunzip(packed, std::uint64_t{1} << 31, (dir / gz).string());
  }
  if (task.dataset.files.count(name) == 0) {
    return invalid_input("dataset.files: pins neither \"" + name + "\" nor \"" + gz + "\"");
  }
  return read_pinned(task, dir, name);
}

Result<Dataset> mnist(const Task& task, const fs::path& dir, std::int64_t limit) {
  VT_ASSIGN_OR_RETURN(Bytes img, read_idx(task, dir, "train-images-idx3-ubyte"));
  VT_ASSIGN_OR_RETURN(Bytes lab, read_idx(task, dir, "train-labels-idx1-ubyte"));
  if (img.size() < 16 || be32(img, 0) != 2051)
    return invalid_input("train-images-idx3-ubyte: not an idx3 image file (magic 2051)");
  if (lab.size() < 8 || be32(lab, 0) != 2049)
    return invalid_input("train-labels-idx1-ubyte: not an idx1 label file (magic 2049)");
  std::uint64_t n = be32(img, 4), rows = be32(img, 8), cols = be32(img, 12);
  if (rows != 28 || cols != 28)
    return invalid_input("train-images-idx3-ubyte: images are not 28x28");
  // An empty pair passes every other check; an epoch over zero examples has no batch to draw.
  if (n == 0) return invalid_input("train-images-idx3-ubyte: holds no images");
  if (be32(lab, 4) != n) return invalid_input("MNIST: image and label files hold different counts");
  if (img.size() != 16 + n * 784 || lab.size() != 8 + n)
    return invalid_input("MNIST: file size does not match its header (truncated?)");
  if (limit > 0 && static_cast<std::uint64_t>(limit) < n) n = static_cast<std::uint64_t>(limit);
  Dataset d;
  d.size = static_cast<std::int64_t>(n);
  d.input_shape = {784};
  d.inputs.resize(n * 784);
  d.class_targets.resize(n);
  for (std::size_t i = 0; i < n * 784; ++i) d.inputs[i] = static_cast<float>(img[16 + i]) / 255.0f;
  for (std::size_t i = 0; i < n; ++i) {
    if (lab[8 + i] > 9)
      return invalid_input("train-labels-idx1-ubyte: label " + std::to_string(lab[8 + i]) + " at " +
                           std::to_string(i));
    d.class_targets[i] = lab[8 + i];
  }
  return d;
}

Result<Dataset> cifar10(const Task& task, const fs::path& dir, std::int64_t limit) {
  constexpr std::size_t kRecord = 1 + 3072;
  Dataset d;
  d.input_shape = {3, 32, 32};
  for (const auto& [name, digest] : task.dataset.files) {  // std::map: sorted by name
    VT_ASSIGN_OR_RETURN(Bytes b, read_pinned(task, dir, name));
    if (b.size() % kRecord != 0)
      return invalid_input(name + ": not a CIFAR-10 binary batch (size not a multiple of 3073)");
    for (std::size_t r = 0; r < b.size() / kRecord; ++r) {
      if (limit > 0 && d.size == limit) break;
      const std::uint8_t* rec = b.data() + r * kRecord;
      if (rec[0] > 9)
        return invalid_input(name + ": label " + std::to_string(rec[0]) + " in record " +
                             std::to_string(r));
      d.class_targets.push_back(rec[0]);
      for (std::size_t p = 1; p < kRecord; ++p)
        d.inputs.push_back(static_cast<float>(rec[p]) / 255.0f - 0.5f);
      ++d.size;
    }
  }
  if (d.size == 0) return invalid_input("cifar10: no records in the pinned files");
  return d;
}

}  // namespace

Result<Dataset> load_dataset(const TrainingTask& resolved, const fs::path& task_dir) {
  const Task& task = resolved.task;
  const Options& model = resolved.model;
  const Options& opt = resolved.dataset;
  const fs::path dir = task_dir / task.dataset.path;
  const DatasetRow& dataset = resolved.zoo_dataset();
  switch (dataset.kind) {
    case DatasetKind::kMnist:
      return mnist(task, dir, opt.at("limit"));
    case DatasetKind::kCifar10:
      return cifar10(task, dir, opt.at("limit"));
    case DatasetKind::kTensors:
    case DatasetKind::kTokens:
      return invalid_input("dataset " + dataset.name +
                           " is memory-mapped, never loaded whole (training/data/mapped_data.h)");
    case DatasetKind::kSynthetic:
      break;
  }
  const std::int64_t samples = opt.at("samples");
  const ModelRow& m = resolved.zoo_model();
  switch (m.input) {
    case InputKind::kFeatures: {
      // A user module's synthetic features are sized by the dataset's options.
      const Options& sizes = m.user_module ? opt : model;
      return blobs(task.seed, samples, sizes.at("input_dim"), sizes.at("classes"));
    }
    case InputKind::kImages:
      return images(task.seed, samples, model.at("classes"));
    case InputKind::kVolumes:
      return volumes(task.seed, samples, model.at("size"));
    case InputKind::kTokens:
      return tokens(task.seed, samples, model.at("vocab"), model.at("seq_len"));
  }
  return internal_error("load_dataset: no synthetic data for model " + m.name);
}

Result<std::vector<std::int64_t>> epoch_order(std::uint64_t seed, std::int64_t epoch,
                                              std::int64_t dataset_size, std::int64_t steps,
                                              std::int64_t batch) {
  // Each pass adds dataset_size examples: with none, the loop below would never end.
  if (dataset_size <= 0) return invalid_input("dataset: holds no examples to draw an epoch from");
  const std::int64_t needed = steps * batch;
  std::vector<std::int64_t> order;
  order.reserve(static_cast<std::size_t>(needed));
  for (std::uint64_t pass = 0; static_cast<std::int64_t>(order.size()) < needed; ++pass) {
    Prng rng(seed, kOrder, (static_cast<std::uint64_t>(epoch) << 20) ^ pass);
    for (std::int64_t i : rng.permutation(dataset_size)) {
      if (static_cast<std::int64_t>(order.size()) == needed) break;
      order.push_back(i);
    }
  }
  return order;
}

Digest order_digest(const std::vector<std::int64_t>& order) {
  Sha256 h;
  std::uint8_t buf[8];
  for (std::int64_t i : order) {
    put_u64le(buf, static_cast<std::uint64_t>(i));
    h.update(ByteSpan(buf, 8));
  }
  return h.finish();
}

DataShape resident_shape(const Dataset& data) {
  DataShape s;
  s.examples = s.permuted = data.size;
  s.input_bytes = saturating_product(data.input_shape, data.tokens() ? 8 : 4);
  s.target_bytes = saturating_product(data.target_shape, data.float_targets.empty() ? 8 : 4);
  s.resident = true;
  return s;
}

}  // namespace vt::training

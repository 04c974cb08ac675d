#include "training/data/mapped_data.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "common/sha256.h"
#include "training/data/data.h"
#include "training/zoo/prng.h"
#include "training/zoo/zoo.h"

namespace vt::training {
namespace fs = std::filesystem;
namespace {

// data.cpp's streams are 1 (synthetic data) and 2 (order); windows draw from their own.
constexpr std::uint64_t kWindowStream = 3;
constexpr std::uint64_t kHeldOutStream = 4;

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string dtype_text(DType d) { return std::string(dtype_name(d)); }

bool is_integer(DType d) {
  return d == DType::kI64 || d == DType::kI32 || d == DType::kI16 || d == DType::kI8 ||
         d == DType::kU8;
}

// One little-endian value of an integer dtype (is_integer), sign-extended.
std::int64_t integer_at(const std::uint8_t* p, DType d) {
  switch (d) {
    case DType::kI64:
      return static_cast<std::int64_t>(get_u64le(p));
    case DType::kI32:
      return static_cast<std::int32_t>(get_u32le(p));
    case DType::kI16:
      return static_cast<std::int16_t>(static_cast<std::uint16_t>(p[0] | p[1] << 8));
    case DType::kI8:
      return static_cast<std::int8_t>(p[0]);
    default:
      return p[0];  // kU8
  }
}

// Opens the pinned files in name order, each checked against its SHA-256 before it is mapped.
Result<std::vector<MappedFile>> open_pinned(const fs::path& dir,
                                            const std::map<std::string, std::string>& files,
                                            const std::string& field) {
  if (files.empty()) return invalid_input("dataset." + field + ": pins no files");
  std::vector<MappedFile> out;
  for (const auto& [name, digest] : files) {
    const fs::path path = dir / name;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      return invalid_input(std::string("dataset.")
                               .append(field)
                               .append(": file \"")
                               .append(name)
                               .append("\" is missing (looked for ")
                               .append(path.string())
                               .append(")"));
    }
    // Hashed at every open: a process opens its task's data once (a verify replays every epoch
    // in one trainer per process), and a cache keyed by file identity would trust metadata.
    VT_ASSIGN_OR_RETURN(Digest actual, sha256_file(path));
    if (hex_encode(actual) != digest) {
      return invalid_input(path.string()
                               .append(": SHA-256 is ")
                               .append(hex_encode(actual))
                               .append(", dataset.")
                               .append(field)
                               .append(" pins ")
                               .append(digest));
    }
    VT_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
    out.push_back(std::move(file));
  }
  return out;
}

}  // namespace

std::size_t Column::row_bytes() const {
  std::size_t n = dtype_size(dtype);
  for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

Result<std::unique_ptr<MappedDataset>> MappedDataset::open(
    const TrainingTask& resolved, const fs::path& dir,
    const std::map<std::string, std::string>& files, const std::string& split) {
  const Task& task = resolved.task;
  const Options& opt = resolved.dataset;
  auto data = std::unique_ptr<MappedDataset>(new MappedDataset());
  data->split_ = split;
  const std::string field = split == "eval" ? "eval_files" : "files";
  VT_ASSIGN_OR_RETURN(std::vector<MappedFile> mapped, open_pinned(dir, files, field));
  if (resolved.zoo_dataset().kind == DatasetKind::kTokens) {
    std::int64_t context = opt.at("context");
    // A model of token sequences takes windows of its own length unless the task says otherwise.
    if (context == 0 && resolved.zoo_model().input == InputKind::kTokens)
      context = resolved.model.at("seq_len");
    if (context == 0)
      return invalid_input("dataset.options.context: required for model " + task.model.name);
    VT_RETURN_IF_ERROR(data->open_tokens(std::move(mapped), context, opt.at("token_bits") / 8));
  } else {
    VT_RETURN_IF_ERROR(data->open_tensors(std::move(mapped)));
  }
  return data;
}

Status MappedDataset::open_tensors(std::vector<MappedFile> files) {
  for (MappedFile& file : files) {
    const std::string where = file.path().string();
    auto view = parse_safetensors(file.bytes(), Canonical::kAllowAny);
    if (!view) return view.error().context(where);
    const TensorEntry* in = view->find("inputs");
    const TensorEntry* tg = view->find("targets");
    if (in == nullptr || tg == nullptr) {
      return invalid_input(where +
                           ": a tensors shard needs tensors named \"inputs\" and \"targets\"");
    }
    if (in->shape.empty() || tg->shape.empty()) {
      return invalid_input(where + ": inputs and targets need a first dimension (examples)");
    }
    if (in->shape[0] != tg->shape[0]) {
      return invalid_input(where + ": inputs hold " + std::to_string(in->shape[0]) +
                           " examples, targets " + std::to_string(tg->shape[0]));
    }
    if (in->dtype == DType::kBool || in->dtype == DType::kF64) {
      return invalid_input(where + ": inputs have dtype " + dtype_text(in->dtype) +
                           " (expected F32, BF16, F16 or an integer type)");
    }
    if (tg->dtype != DType::kI64 && tg->dtype != DType::kF32) {
      return invalid_input(where + ": targets have dtype " + dtype_text(tg->dtype) +
                           " (expected I64 class ids or F32 regression targets)");
    }
    Column ci{in->dtype, {in->shape.begin() + 1, in->shape.end()}};
    Column ct{tg->dtype, {tg->shape.begin() + 1, tg->shape.end()}};
    if (shards_.empty()) {
      inputs_ = ci;
      targets_ = ct;
    } else if (ci.dtype != inputs_.dtype || ci.shape != inputs_.shape ||
               ct.dtype != targets_.dtype || ct.shape != targets_.shape) {
      return invalid_input(where + ": shard holds inputs " + dtype_text(ci.dtype) +
                           shape_text(ci.shape) + ", targets " + dtype_text(ct.dtype) +
                           shape_text(ct.shape) + " per example; the first shard holds " +
                           dtype_text(inputs_.dtype) + shape_text(inputs_.shape) + ", " +
                           dtype_text(targets_.dtype) + shape_text(targets_.shape));
    }
    Shard s;
    s.first = positions_;
    s.count = in->shape[0];
    s.inputs = view->data(*in);
    s.targets = view->data(*tg);
    s.file = std::move(file);
    positions_ += s.count;
    shards_.push_back(std::move(s));
  }
  examples_ = positions_;
  if (examples_ == 0) return invalid_input("dataset: the " + split_ + " split holds no examples");
  return {};
}

Status MappedDataset::open_tokens(std::vector<MappedFile> files, std::int64_t context,
                                  std::int64_t token_bytes) {
  context_ = context;
  token_bytes_ = token_bytes;
  const std::int64_t window = context + 1;
  for (MappedFile& file : files) {
    const std::string where = file.path().string();
    if (file.size() % static_cast<std::uint64_t>(token_bytes) != 0) {
      return invalid_input(where + ": " + std::to_string(file.size()) +
                           " bytes is not a whole number of " + std::to_string(token_bytes * 8) +
                           "-bit tokens (dataset.options.token_bits)");
    }
    const auto tokens =
        static_cast<std::int64_t>(file.size() / static_cast<std::uint64_t>(token_bytes));
    if (tokens < window) {
      return invalid_input(
          where + ": holds " + std::to_string(tokens) +
          " tokens, shorter than one window of context + 1 = " + std::to_string(window));
    }
    Shard s;
    s.first = positions_;
    s.count = tokens - context;  // window starts 0 .. tokens - window
    s.inputs = file.bytes();
    s.file = std::move(file);
    positions_ += s.count;
    examples_ += tokens / window;
    shards_.push_back(std::move(s));
  }
  inputs_ = {DType::kI64, {context}};
  targets_ = {DType::kI64, {context}};
  return {};
}

void MappedDataset::select(std::vector<std::int64_t> rows) {
  rows_ = std::move(rows);
  examples_ = positions_ = static_cast<std::int64_t>(rows_.size());
}

const MappedDataset::Shard& MappedDataset::shard_of(std::int64_t index) const {
  auto it = std::upper_bound(shards_.begin(), shards_.end(), index,
                             [](std::int64_t i, const Shard& s) { return i < s.first; });
  return *(it - 1);
}

Status MappedDataset::gather_window(std::int64_t offset, std::int64_t* in, std::int64_t* out,
                                    std::int64_t limit) const {
  const Shard& s = shard_of(offset);
  const std::int64_t local = offset - s.first;
  const std::uint8_t* p = s.inputs.data() + static_cast<std::size_t>(local * token_bytes_);
  for (std::int64_t t = 0; t <= context_; ++t, p += token_bytes_) {
    const std::int64_t v = token_bytes_ == 2 ? std::int64_t{p[0]} | std::int64_t{p[1]} << 8
                                             : static_cast<std::int64_t>(get_u32le(p));
    if (limit > 0 && v >= limit) {
      return invalid_input(s.file.path().string() + ": token " + std::to_string(v) +
                           " at position " + std::to_string(local + t) +
                           " is outside the model's vocabulary of " + std::to_string(limit));
    }
    if (t < context_) in[t] = v;
    if (t > 0) out[t - 1] = v;
  }
  return {};
}

Status MappedDataset::gather(std::span<const std::int64_t> indices, std::uint8_t* inputs_out,
                             std::uint8_t* targets_out, std::int64_t token_limit) const {
  const std::size_t in_row = inputs_.row_bytes(), tg_row = targets_.row_bytes();
  for (std::size_t k = 0; k < indices.size(); ++k) {
    std::int64_t i = indices[k];
    if (i < 0 || i >= positions_) {
      return internal_error("dataset: example " + std::to_string(i) + " outside 0.." +
                            std::to_string(positions_ - 1));
    }
    if (!rows_.empty()) i = rows_[static_cast<std::size_t>(i)];
    if (windowed()) {
      VT_RETURN_IF_ERROR(gather_window(i, reinterpret_cast<std::int64_t*>(inputs_out + k * in_row),
                                       reinterpret_cast<std::int64_t*>(targets_out + k * tg_row),
                                       token_limit));
      continue;
    }
    const Shard& s = shard_of(i);
    const auto local = static_cast<std::size_t>(i - s.first);
    std::memcpy(inputs_out + k * in_row, s.inputs.data() + local * in_row, in_row);
    std::memcpy(targets_out + k * tg_row, s.targets.data() + local * tg_row, tg_row);
    // Every integer dtype reaches the Embedding as I64: a value outside the vocabulary would be
    // an index error inside LibTorch (a device assert on CUDA), not a message about the input.
    if (token_limit > 0 && is_integer(inputs_.dtype)) {
      const std::size_t width = dtype_size(inputs_.dtype);
      for (std::size_t j = 0; j < in_row / width; ++j) {
        const std::int64_t v = integer_at(inputs_out + k * in_row + j * width, inputs_.dtype);
        if (v < 0 || v >= token_limit) {
          return invalid_input(s.file.path().string() + ": inputs of example " +
                               std::to_string(local) + " hold token " + std::to_string(v) +
                               ", outside the model's vocabulary of " +
                               std::to_string(token_limit));
        }
      }
    }
  }
  return {};
}

Status MappedDataset::check_class_targets(std::int64_t classes) const {
  if (windowed() || targets_.dtype != DType::kI64) return {};
  for (const Shard& s : shards_) {
    for (std::size_t j = 0; j < s.targets.size() / 8; ++j) {
      const auto v = static_cast<std::int64_t>(get_u64le(s.targets.data() + j * 8));
      if (v < 0 || v >= classes) {
        const std::optional<std::int64_t> largest = largest_class_target();
        return invalid_input(
            s.file.path().string() + ": targets[" + std::to_string(j) + "] = " + std::to_string(v) +
            " is not a class id in 0.." + std::to_string(classes - 1) +
            " (the model's classes, or vocab for a gpt, is " + std::to_string(classes) + ")" +
            (v >= 0 && largest
                 ? "; the data's largest class id is " + std::to_string(*largest) +
                       ": set the model's classes (or vocab) to " + std::to_string(*largest + 1) +
                       " (task init fills it from the data)"
                 : std::string("; class ids must not be negative")));
      }
    }
  }
  return {};
}

std::optional<std::int64_t> MappedDataset::largest_class_target() const {
  std::optional<std::int64_t> largest;
  const auto see = [&](std::int64_t v) { largest = largest ? std::max(*largest, v) : v; };
  for (const Shard& s : shards_) {
    if (windowed()) {
      const auto width = static_cast<std::size_t>(token_bytes_);
      for (std::size_t j = 0; j + width <= s.inputs.size(); j += width) {
        const std::uint8_t* p = s.inputs.data() + j;
        see(width == 2 ? std::int64_t{p[0]} | std::int64_t{p[1]} << 8
                       : static_cast<std::int64_t>(get_u32le(p)));
      }
    } else if (targets_.dtype == DType::kI64) {
      for (std::size_t j = 0; j < s.targets.size() / 8; ++j)
        see(static_cast<std::int64_t>(get_u64le(s.targets.data() + j * 8)));
    }
  }
  return largest;
}

std::vector<std::int64_t> MappedDataset::eval_order() const {
  std::vector<std::int64_t> out;
  if (!windowed()) {
    out.resize(static_cast<std::size_t>(examples_));
    for (std::int64_t i = 0; i < examples_; ++i) out[static_cast<std::size_t>(i)] = i;
    return out;
  }
  for (const Shard& s : shards_) {
    for (std::int64_t at = 0; at < s.count; at += context_ + 1) out.push_back(s.first + at);
  }
  return out;
}

std::vector<std::int64_t> held_out_rows(std::uint64_t seed, std::int64_t rows, double fraction) {
  auto n = static_cast<std::int64_t>(static_cast<double>(rows) * fraction);
  n = std::clamp<std::int64_t>(n, 1, std::max<std::int64_t>(1, rows - 1));
  std::vector<std::int64_t> perm = Prng(seed, kHeldOutStream).permutation(rows);
  perm.resize(static_cast<std::size_t>(n));
  std::sort(perm.begin(), perm.end());
  return perm;
}

Result<std::vector<std::int64_t>> mapped_order(const MappedDataset& data, std::uint64_t seed,
                                               std::int64_t epoch, std::int64_t steps,
                                               std::int64_t batch) {
  if (data.positions() <= 0)
    return invalid_input("dataset: holds no examples to draw an epoch from");
  if (!data.windowed()) return epoch_order(seed, epoch, data.positions(), steps, batch);
  Prng rng(seed, kWindowStream, static_cast<std::uint64_t>(epoch));
  std::vector<std::int64_t> order(static_cast<std::size_t>(steps * batch));
  for (std::int64_t& o : order)
    o = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(data.positions())));
  return order;
}

Status check_against_model(const TrainingTask& resolved, const MappedDataset& data) {
  const Task& task = resolved.task;
  const Options& model = resolved.model;
  const ModelRow& m = resolved.zoo_model();
  const Column& in = data.inputs();
  const Column& tg = data.targets();
  const std::string got = " (the dataset holds inputs " + dtype_text(in.dtype) +
                          shape_text(in.shape) + ", targets " + dtype_text(tg.dtype) +
                          shape_text(tg.shape) + " per example)";
  if (task.loss == "cross_entropy" && tg.dtype != DType::kI64) {
    return invalid_input("dataset: loss cross_entropy needs I64 class-id targets, got " +
                         dtype_text(tg.dtype) + got);
  }
  if (task.loss == "mse" && tg.dtype != DType::kF32) {
    return invalid_input("dataset: loss mse needs F32 targets, got " + dtype_text(tg.dtype) + got);
  }
  if (m.user_module) return {};  // inputs reach the module as stored
  switch (m.input) {
    case InputKind::kFeatures: {
      std::int64_t features = 1;
      for (std::int64_t d : in.shape) features *= d;
      if (features != model.at("input_dim") || !tg.shape.empty()) {
        return invalid_input(
            "dataset: " + m.name + " expects " + std::to_string(model.at("input_dim")) +
            " input features (model.options.input_dim) and one class id per example, got " +
            std::to_string(features) + " features" + got +
            (tg.shape.empty() ? "; set model.options.input_dim to " + std::to_string(features) +
                                    " (task init fills it from the data)"
                              : std::string()));
      }
      return data.check_class_targets(model.at("classes"));
    }
    case InputKind::kImages:
      if (in.shape.size() != 3 || in.shape[0] != 3 || !tg.shape.empty()) {
        return invalid_input("dataset: " + m.name +
                             " expects [3, H, W] images and one class id per example" + got);
      }
      return data.check_class_targets(model.at("classes"));
    case InputKind::kVolumes: {
      const std::int64_t n = model.at("size");
      const std::vector<std::int64_t> want{1, n, n, n};
      if (in.shape != want || tg.shape != want) {
        return invalid_input("dataset: " + m.name + " expects inputs and targets " +
                             shape_text(want) + got);
      }
      return {};
    }
    case InputKind::kTokens:
      if (!is_integer(in.dtype) || in.shape.size() != 1 || tg.shape != in.shape) {
        return invalid_input("dataset: " + m.name +
                             " expects integer token ids [T] and I64 next tokens [T]" + got);
      }
      if (in.shape[0] > model.at("seq_len")) {
        return invalid_input("dataset: windows of " + std::to_string(in.shape[0]) +
                             " tokens exceed " + m.name + "'s seq_len " +
                             std::to_string(model.at("seq_len")) + got);
      }
      return data.check_class_targets(model.at("vocab"));
  }
  return {};
}

DataShape mapped_shape(const MappedDataset& data, const TrainingTask& resolved) {
  // Built-in models take float inputs (token models: int64 tokens), whatever dtype the files
  // store; a user module takes them as stored.
  const ModelRow& m = resolved.zoo_model();
  const Column& in = data.inputs();
  const auto elements = static_cast<std::int64_t>(in.row_bytes() / dtype_size(in.dtype));
  DataShape s;
  s.examples = data.examples();
  s.permuted = data.windowed() ? 0 : data.positions();
  s.input_bytes = m.user_module
                      ? in.row_bytes()
                      : saturating_product({&elements, 1}, m.input == InputKind::kTokens ? 8 : 4);
  s.input_bytes = std::max<std::uint64_t>(s.input_bytes, in.row_bytes());
  s.target_bytes = data.targets().row_bytes();
  return s;
}

}  // namespace vt::training

#include "training/internal/batches.h"

#include <c10/core/GradMode.h>

#include "training/data/augment.h"
#include "training/internal/snapshot.h"

namespace vt::training {

std::vector<std::int64_t> batched(std::int64_t n, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> out{n};
  out.insert(out.end(), shape.begin(), shape.end());
  return out;
}

Result<std::pair<at::Tensor, at::Tensor>> MappedSplit::batch(std::span<const std::int64_t> indices,
                                                             const at::Device& device) const {
  const auto n = static_cast<std::int64_t>(indices.size());
  const Column& in = data->inputs();
  const Column& tg = data->targets();
  // Rows are copied out of the map on the host (shards need not be aligned for their dtype),
  // then moved to the device as one transfer per tensor.
  at::Tensor x =
      at::empty(batched(n, in.shape), at::TensorOptions().dtype(to_scalar_type(in.dtype)));
  at::Tensor y =
      at::empty(batched(n, tg.shape), at::TensorOptions().dtype(to_scalar_type(tg.dtype)));
  VT_RETURN_IF_ERROR(data->gather(indices, static_cast<std::uint8_t*>(x.data_ptr()),
                                  static_cast<std::uint8_t*>(y.data_ptr()), token_limit));
  if (input_type && x.scalar_type() != *input_type) x = x.to(*input_type);
  return std::make_pair(x.to(device), y.to(device));
}

at::Tensor augment_batch(const at::Tensor& x, const Task& task, std::int64_t epoch,
                         std::int64_t first_position) {
  // Copies on the host: a batch is small beside its step, and the pixels move, never change.
  const at::Tensor in = x.to(at::kCPU).contiguous();
  at::Tensor out = at::empty_like(in);
  const std::int64_t n = in.size(0), c = in.size(1), h = in.size(2), w = in.size(3);
  const std::int64_t image = c * h * w;
  const float* from = in.data_ptr<float>();
  float* to = out.data_ptr<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    const AugmentDraw draw =
        augment_draw(task.dataset.augment, task.seed, epoch, first_position + i);
    augment_image(task.dataset.augment, draw, c, h, w, from + i * image, to + i * image);
  }
  return out.to(x.device());
}

Status check_augmentable_input(const Task& task, const std::vector<std::int64_t>& shape,
                               bool float_input) {
  if (!task.dataset.augment.any()) return {};
  if (!float_input)
    return invalid_input(
        "dataset.augment: applies to float images; this task's model receives its inputs as "
        "stored, not as f32 (docs/datasets.md, \"What the model receives\")");
  return check_augmentable(task.dataset.augment, shape);
}

Result<MappedSplit> open_mapped_split(const TrainingTask& resolved,
                                      const std::filesystem::path& task_dir,
                                      const std::map<std::string, std::string>& files,
                                      const std::string& split) {
  const Task& task = resolved.task;
  const Options& model_options = resolved.model;
  MappedSplit out;
  VT_ASSIGN_OR_RETURN(out.data,
                      MappedDataset::open(resolved, task_dir / task.dataset.path, files, split));
  VT_RETURN_IF_ERROR(check_against_model(resolved, *out.data));
  // Built-in models take float inputs, or int64 token ids below their vocabulary; a user
  // module takes them as stored.
  const ModelRow& m = resolved.zoo_model();
  if (!m.user_module && m.input == InputKind::kTokens) {
    out.input_type = at::kLong;
    out.token_limit = model_options.at("vocab");
  } else if (!m.user_module) {
    out.input_type = at::kFloat;
  }
  return out;
}

}  // namespace vt::training

namespace vt::training {

Result<std::optional<MappedSplit>> open_eval_split(const TrainingTask& resolved,
                                                   const std::filesystem::path& task_dir,
                                                   MappedSplit& train) {
  const Task& task = resolved.task;
  if (!task.dataset.eval_files.empty()) {
    VT_ASSIGN_OR_RETURN(MappedSplit eval,
                        open_mapped_split(resolved, task_dir, task.dataset.eval_files, "eval"));
    const Column &a = train.data->inputs(), &b = eval.data->inputs();
    if (a.dtype != b.dtype || a.shape != b.shape ||
        train.data->targets().dtype != eval.data->targets().dtype ||
        train.data->targets().shape != eval.data->targets().shape) {
      return invalid_input(
          "dataset.eval_files: the eval split's inputs or targets differ in dtype or shape from "
          "the training files'");
    }
    return std::optional<MappedSplit>(std::move(eval));
  }
  if (task.dataset.eval_fraction <= 0.0) return std::optional<MappedSplit>();
  const std::int64_t rows = train.data->examples();
  if (rows < 2)
    return invalid_input("dataset.eval_fraction: the dataset holds " + std::to_string(rows) +
                         " example(s); nothing to hold out");
  std::vector<std::int64_t> held = held_out_rows(task.seed, rows, task.dataset.eval_fraction);
  std::vector<std::int64_t> kept;
  kept.reserve(static_cast<std::size_t>(rows) - held.size());
  for (std::int64_t r = 0, h = 0; r < rows; ++r) {
    if (h < static_cast<std::int64_t>(held.size()) && held[static_cast<std::size_t>(h)] == r) {
      ++h;
    } else {
      kept.push_back(r);
    }
  }
  VT_ASSIGN_OR_RETURN(MappedSplit eval,
                      open_mapped_split(resolved, task_dir, task.dataset.files, "eval"));
  eval.data->select(std::move(held));
  train.data->select(std::move(kept));
  return std::optional<MappedSplit>(std::move(eval));
}

Result<EvalMetrics> evaluate_split(Network& net, const MappedSplit& split, const Task& task,
                                   const at::Device& device) {
  const std::vector<std::int64_t> order = split.data->eval_order();
  // A module that computes its own loss returns a scalar, not logits: its held-out metric is
  // that loss (forward(inputs, targets) in eval mode), and there is no accuracy to count.
  const bool own_loss = task.loss == "model";
  const bool classes = split.data->targets().dtype == DType::kI64 && !own_loss;
  c10::NoGradGuard no_grad;
  net.set_training(false);
  // Sums stay on the device in double: one read at the end, and a fixed summation order.
  at::Tensor loss_sum = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(device));
  at::Tensor hits = at::zeros({}, at::TensorOptions().dtype(at::kLong).device(device));
  std::int64_t targets_seen = 0;
  Status status;
  for (std::size_t at = 0; at < order.size() && status.ok();
       at += static_cast<std::size_t>(task.batch_size)) {
    const std::size_t n = std::min(order.size() - at, static_cast<std::size_t>(task.batch_size));
    auto xy = split.batch(std::span(order).subspan(at, n), device);
    if (!xy) {
      status = xy.error();
      break;
    }
    auto& [x, y] = *xy;
    if (own_loss) {
      loss_sum += net.forward_loss(x, y).to(at::kDouble) * static_cast<double>(n);
      continue;
    }
    at::Tensor out = net.forward(x);
    // The model's plain loss: label smoothing regularises training, it is no held-out metric.
    loss_sum += net.loss(LossSpec{task.loss}, out, y).to(at::kDouble) * static_cast<double>(n);
    if (classes) {
      hits += out.argmax(classes_dim(y)).eq(y).sum();
      targets_seen += y.numel();
    }
  }
  net.set_training(true);
  VT_RETURN_IF_ERROR(std::move(status));
  EvalMetrics m;
  m.examples = static_cast<std::int64_t>(order.size());
  m.loss = loss_sum.item<double>() / static_cast<double>(order.size());
  if (classes)
    m.accuracy = static_cast<double>(hits.item<std::int64_t>()) / static_cast<double>(targets_seen);
  return m;
}

}  // namespace vt::training

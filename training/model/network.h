#pragma once
// The models behind one small interface, whatever builds them (training/model/models.h for the
// zoo, training/script/module.h for a requestor's TorchScript module). LibTorch types: for
// training/ alone.

#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "protocol/task.h"

namespace vt::training {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// A user module's own failure (a wrong input shape, an exception it raises): bad input, exit 2,
// with the module's message; never an internal error with the interpreter's traceback.
struct ModelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The built-in loss a step trains with: its name ("cross_entropy", "mse"; "model" is the
// module's own) and its options (docs/task.md, "Recipes").
struct LossSpec {
  std::string name;
  double label_smoothing = 0.0;  // cross_entropy
};
inline LossSpec loss_of(const Task& task) { return {task.loss, task.loss_options.label_smoothing}; }

// The task's loss of `output` against `target` in LibTorch's arithmetic (cross_entropy flattens
// token dimensions), as torch.nn.functional computes it.
at::Tensor compute_loss(const LossSpec& loss, const at::Tensor& output, const at::Tensor& target);

// The dimension of a cross-entropy output that holds the classes, by the targets' shape: last for
// class ids [B] and tokens [B, T] (output [B, C], [B, T, C]); second for per-position targets
// [B, H, W, ...] (output [B, C, H, W, ...], PyTorch's form for segmentation).
inline std::int64_t classes_dim(const at::Tensor& target) { return target.dim() >= 3 ? 1 : -1; }

class Network {
 public:
  virtual ~Network() = default;
  virtual at::Tensor forward(const at::Tensor& input) = 0;
  // The task's loss of `output` in this network's arithmetic (compute_loss for LibTorch's).
  virtual at::Tensor loss(const LossSpec& loss, const at::Tensor& output,
                          const at::Tensor& target) {
    return compute_loss(loss, output, target);
  }
  // Portable arithmetic (docs/portable.md): whether this network computes in it, its initial
  // weights, and the key of each training forward pass (its dropout masks).
  virtual bool portable() const { return false; }
  virtual void init_portable(std::uint64_t seed) { (void)seed; }
  virtual void begin_forward(std::int64_t global_step, std::int64_t group) {
    (void)global_step, (void)group;
  }
  // loss "model": the module's forward(inputs, targets) is the scalar loss.
  virtual at::Tensor forward_loss(const at::Tensor& input, const at::Tensor& target);
  // The module itself, with its current parameters and buffers, as a TorchScript file.
  virtual Status save_torchscript(const std::filesystem::path& file);
  // Stable names and order: the snapshot's "param/<name>" and "buffer/<name>" tensors.
  virtual NamedTensors parameters() = 0;
  // The kind of module each parameter belongs to, by parameter name ("Linear", "LayerNorm",
  // "BatchNorm2d": the class name, without namespace or "Impl"), for optimizer.no_decay's
  // norm_and_bias rule.
  virtual std::map<std::string, std::string> parameter_modules() = 0;
  virtual NamedTensors buffers() = 0;
  virtual void to(const at::Device& device) = 0;
  virtual void set_training(bool training) = 0;
  // Activation checkpointing (TrainerOptions::checkpoint_activations): each block's activations
  // recomputed in the backward pass instead of kept, the same bits either way. False where the
  // network has no blocks to checkpoint (every model but the zoo's gpt).
  virtual bool checkpoint_activations(bool on) { return !on; }
};

// The step's loss: the module's own for loss "model", else compute_loss of its output.
at::Tensor step_loss(const LossSpec& loss, Network& net, const at::Tensor& input,
                     const at::Tensor& target);

// One forward pass on `input` checked against `target` for `loss`: what the model returns must
// be what the loss takes ([B, C] logits for [B] class ids, holding class `max_class`; the
// targets' shape for mse; a scalar for "model"). The message names expected and got.
Status check_model_fits(const std::string& loss, Network& net, const at::Tensor& input,
                        const at::Tensor& target, std::int64_t max_class);

// The module's own words in a LibTorch error: from the last "SomethingError: ..." line on,
// without the TorchScript interpreter's traceback.
std::string model_message(const std::string& what);

// A module class's name as parameter_modules() gives it: "torch::nn::LayerNormImpl" and
// "__torch__.torch.nn.modules.normalization.LayerNorm" are both "LayerNorm".
std::string module_kind(const std::string& class_name);

// "[8, 32] Float": how errors name a tensor.
std::string describe_tensor(const at::Tensor& t);

}  // namespace vt::training

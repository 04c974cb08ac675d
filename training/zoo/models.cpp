// The model table: one row per zoo model (training/zoo/zoo.h), each with its options, defaults
// and its size as arithmetic over them. The modules themselves are training/model/models.cpp's;
// tests/training/sizes_trainer_test.cpp holds each count to the module it describes.
#include <string>

#include "training/zoo/saturating.h"
#include "training/zoo/zoo.h"

namespace vt::training {
namespace {

using saturating::add;
using saturating::mul;
using saturating::u;

std::uint64_t at(const Options& o, const char* key) { return u(o.at(key)); }

// --- mlp: Linear layers with ReLU ------------------------------------------------------------

std::uint64_t mlp_parameters(const Options& o) {
  const std::uint64_t in = at(o, "input_dim"), h = at(o, "hidden"), layers = at(o, "layers");
  const std::uint64_t c = at(o, "classes");
  if (layers == 0) return add(mul(in, c), c);
  const std::uint64_t hidden = add(mul(in, h), h);
  return add(add(hidden, mul(layers - 1, add(mul(h, h), h))), add(mul(h, c), c));
}
std::uint64_t mlp_activations(const Options& o) {
  return add(mul(2, at(o, "layers"), at(o, "hidden")), at(o, "classes"));
}
ModelTensors mlp_tensors(const Options& o) {
  return {2 * (at(o, "layers") + 1), 0, 0};  // weight and bias per Linear
}

// --- cnn: a small ResNet with BatchNorm, two stages ------------------------------------------

std::uint64_t cnn_parameters(const Options& o) {  // convolutions without bias; BatchNorm's affine
  const std::uint64_t w = at(o, "width"), blocks = at(o, "blocks"), c = at(o, "classes");
  const std::uint64_t stem = add(mul(27, w), mul(2, w));
  const std::uint64_t first = add(mul(18, w, w), mul(4, w));   // width -> width
  const std::uint64_t widen = add(mul(56, w, w), mul(12, w));  // width -> 2 width, stride 2
  const std::uint64_t second = add(mul(72, w, w), mul(8, w));  // 2 width -> 2 width
  const std::uint64_t head = add(mul(2, w, c), c);
  return add(add(stem, mul(blocks, first)), add(add(widen, mul(blocks - 1, second)), head));
}
std::uint64_t cnn_activations(const Options& o) {
  // 32x32 maps in the first stage, 16x16 in the second, at twice the width.
  const std::uint64_t w = at(o, "width"), blocks = at(o, "blocks");
  return add(mul(2 + 4 * blocks, w, 1024), mul(4, blocks, 2 * w, 256));
}
ModelTensors cnn_tensors(const Options& o) {
  // The stem (convolution, BatchNorm), `blocks` blocks at width (two of each), the widening
  // block with its shortcut (three of each), blocks - 1 at twice the width, the Linear head.
  // Every BatchNorm has a weight and a bias, and a running mean and variance of its channels.
  const std::uint64_t w = at(o, "width"), blocks = at(o, "blocks");
  return {add(mul(12, blocks), 8), add(mul(8, blocks), 4), add(mul(12, w, blocks), mul(6, w))};
}

// --- conv3d: 1 -> 4 -> 8 -> 1 channels of 3x3x3 convolutions ---------------------------------

std::uint64_t conv3d_parameters(const Options&) {
  return (1 * 4 * 27 + 4) + (4 * 8 * 27 + 8) + (8 * 1 * 27 + 1);
}
std::uint64_t conv3d_activations(const Options& o) {
  return mul(26, at(o, "size"), at(o, "size"), at(o, "size"));
}
ModelTensors conv3d_tensors(const Options&) { return {6, 0, 0}; }

// --- gpt: a decoder-only transformer ---------------------------------------------------------

std::uint64_t gpt_parameters(const Options& o) {
  // Embeddings, blocks of LayerNorm + attention + MLP, the final norm, the head.
  const std::uint64_t v = at(o, "vocab"), d = at(o, "d_model"), t = at(o, "seq_len");
  const std::uint64_t r = at(o, "mlp_ratio");
  const std::uint64_t block = add(add(mul(4, d, d), mul(2, r, d, d)), add(mul(9, d), mul(r, d)));
  const std::uint64_t ends = add(add(mul(v, d), mul(t, d)), add(mul(2, d), add(mul(d, v), v)));
  return add(ends, mul(at(o, "layers"), block));
}
std::uint64_t gpt_activations(const Options& o) {
  const std::uint64_t t = at(o, "seq_len"), d = at(o, "d_model");
  const std::uint64_t per_layer =
      add(mul(10 + 2 * at(o, "mlp_ratio"), d, t), mul(2, at(o, "heads"), t, t));
  return add(mul(at(o, "layers"), per_layer), add(mul(4, d, t), mul(2, at(o, "vocab"), t)));
}
ModelTensors gpt_tensors(const Options& o) {
  return {add(6, mul(12, at(o, "layers"))), 0, 0};  // six Linear/LayerNorm a block
}
std::string gpt_check(const Options& o) {
  if (o.at("d_model") % o.at("heads") == 0) return "";
  return "model.options.d_model: " + std::to_string(o.at("d_model")) +
         " is not a multiple of heads (" + std::to_string(o.at("heads")) + ")";
}

std::vector<ModelRow> make_models() {
  using enum DatasetKind;
  std::vector<ModelRow> rows(kModelKinds);
  auto row = [&](ModelKind kind) -> ModelRow& {
    ModelRow& r = rows[static_cast<std::size_t>(kind)];
    r.kind = kind;
    return r;
  };
  {
    ModelRow& r = row(ModelKind::kMlp);
    r.name = "mlp";
    r.description = "multilayer perceptron on feature vectors (synthetic blobs or MNIST)";
    r.input = InputKind::kFeatures;
    r.loss = "cross_entropy";
    r.options = {{"input_dim", 32, 1, 1 << 20, "features per example (784 for MNIST)"},
                 {"hidden", 64, 1, 1 << 16, "units per hidden layer"},
                 {"layers", 2, 0, 64, "hidden layers"},
                 {"classes", 4, 2, 100000, "output classes"}};
    r.datasets = {kMnist, kTensors};
    r.class_option = "classes";
    r.feature_option = "input_dim";
    r.parameters = mlp_parameters;
    r.activation_floats = mlp_activations;
    r.tensors = mlp_tensors;
  }
  {
    ModelRow& r = row(ModelKind::kCnn);
    r.name = "cnn";
    r.description = "small ResNet with BatchNorm for 32x32x3 images (synthetic or CIFAR-10)";
    r.input = InputKind::kImages;
    r.loss = "cross_entropy";
    r.options = {{"width", 16, 1, 1024, "channels of the first stage (doubled in the second)"},
                 {"blocks", 1, 1, 64, "residual blocks per stage (two stages)"},
                 {"classes", 10, 2, 100000, "output classes"}};
    r.datasets = {kCifar10, kTensors};
    r.class_option = "classes";
    r.convolutional = true;
    r.sgd_weight_decay = 5e-4;
    r.parameters = cnn_parameters;
    r.activation_floats = cnn_activations;
    r.tensors = cnn_tensors;
  }
  {
    ModelRow& r = row(ModelKind::kConv3d);
    r.name = "conv3d";
    r.description = "3D conv net 1->4->8->1 with ReLU, MSE against a target volume";
    r.input = InputKind::kVolumes;
    r.loss = "mse";
    r.options = {{"size", 16, 4, 1024, "edge N of the N x N x N input volume"}};
    r.datasets = {kTensors};
    r.convolutional = true;
    r.batch_size = 4;
    r.optimizer = "adam";
    r.parameters = conv3d_parameters;
    r.activation_floats = conv3d_activations;
    r.tensors = conv3d_tensors;
  }
  {
    ModelRow& r = row(ModelKind::kGpt);
    r.name = "gpt";
    r.description = "small decoder-only transformer on token sequences";
    r.input = InputKind::kTokens;
    r.loss = "cross_entropy";
    r.options = {{"vocab", 64, 2, 1 << 20, "vocabulary size"},
                 {"d_model", 64, 8, 1 << 15, "embedding width (a multiple of heads)"},
                 {"layers", 2, 1, 256, "transformer blocks"},
                 {"heads", 4, 1, 256, "attention heads"},
                 {"seq_len", 32, 2, 1 << 16, "tokens per sequence"},
                 {"mlp_ratio", 4, 1, 16, "MLP width as a multiple of d_model"},
                 {"dropout_permille", 0, 0, 900, "dropout probability in 1/1000"}};
    r.datasets = {kTensors, kTokens};
    r.class_option = "vocab";
    r.batch_size = 16;
    r.optimizer = "adamw";
    r.adam_lr = 3e-3;
    r.adam_beta2 = 0.95;
    r.schedule = "cosine";
    r.warmup_steps = 8;
    r.cosine_min_lr = 3e-4;
    r.parameters = gpt_parameters;
    r.activation_floats = gpt_activations;
    r.tensors = gpt_tensors;
    r.check_options = gpt_check;
  }
  {
    ModelRow& r = row(ModelKind::kTorchScript);
    r.name = std::string(kTorchScriptModel);
    r.description = "a user TorchScript module file: forward(x) -> output";
    r.input = InputKind::kFeatures;
    r.loss = "cross_entropy";
    r.datasets = {kMnist, kCifar10, kTensors, kTokens};
    r.user_module = true;
    r.convolutional = true;  // unknown: the wider of the two calibrations
  }
  return rows;
}

}  // namespace

bool ModelRow::trains_on(DatasetKind dataset) const {
  if (dataset == DatasetKind::kSynthetic) return true;
  for (DatasetKind d : datasets) {
    if (d == dataset) return true;
  }
  return false;
}

const std::vector<ModelRow>& zoo_models() {
  static const std::vector<ModelRow> rows = make_models();
  return rows;
}

const ModelRow& model_row(ModelKind kind) { return zoo_models()[static_cast<std::size_t>(kind)]; }

const ModelRow* find_model(std::string_view name) {
  for (const ModelRow& m : zoo_models()) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

}  // namespace vt::training

#include "training/script/op_table.h"

namespace vt::training {
namespace {

using F = OpForm;

// A kernel-backed operator: the aten operator it replaces, veritrain's name and schema for it.
constexpr PortableOp kernel(std::string_view aten, std::string_view overload, std::string_view ours,
                            std::string_view schema, std::string_view doc, std::string_view traced,
                            bool own_alpha = false) {
  return {aten, overload, F::kKernel, ours, schema, doc, traced, own_alpha};
}
constexpr PortableOp composition(std::string_view aten, std::string_view ours,
                                 std::string_view schema, std::string_view doc,
                                 std::string_view traced, std::string_view overload = "") {
  return {aten, overload, F::kComposition, ours, schema, doc, traced};
}
// An in-place form of an operator above: veritrain::<ours> out of place.
constexpr PortableOp in_place(std::string_view aten, std::string_view ours,
                              std::string_view overload = "") {
  return {aten, overload, F::kInPlace, ours, "", "TorchScript modules", ""};
}
constexpr PortableOp exact(std::string_view aten, std::string_view doc = "TorchScript modules") {
  return {aten, kAnyOverload, F::kExact, "", "", doc, ""};
}
// A function of decompositions.py, the operator's definition, traced as its parts are.
constexpr PortableOp decomposition(std::string_view aten, std::string_view overload,
                                   std::string_view function, std::string_view traced) {
  return {aten, overload, F::kDecomposition, function, "", "Decompositions", traced};
}
constexpr PortableOp move(std::string_view aten) {
  return {aten, kAnyOverload, F::kMove, "", "", "TorchScript modules", ""};
}
// An activation of "More functions": one kernel, forward and backward traced by its name.
#define VT_ACTIVATION(name, schema, traced) \
  kernel("aten::" name, "", name, name schema, name, traced)

constexpr PortableOp kOps[] = {
    // Products and convolution.
    kernel("aten::linear", "", "linear",
           "linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", "Linear",
           "gemm add_bias column_sums"),
    kernel("aten::conv1d", "", "conv",
           "conv(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, "
           "int[] dilation, int groups) -> Tensor",
           "Convolution", "conv conv_backward"),
    kernel("aten::conv2d", "", "conv", "", "Convolution", "conv conv_backward"),
    kernel("aten::conv3d", "", "conv", "", "Convolution", "conv conv_backward"),
    kernel("aten::conv_transpose1d", "", "conv_transpose",
           "conv_transpose(Tensor input, Tensor weight, Tensor? bias, int[] stride, "
           "int[] padding, int[] output_padding, int groups, int[] dilation) -> Tensor",
           "Convolution, further forms", "conv conv_backward"),
    kernel("aten::conv_transpose2d", "input", "conv_transpose", "", "Convolution, further forms",
           "conv conv_backward"),
    kernel("aten::conv_transpose3d", "input", "conv_transpose", "", "Convolution, further forms",
           "conv conv_backward"),
    kernel("aten::matmul", "", "matmul", "matmul(Tensor self, Tensor other) -> Tensor", "Products",
           "baddbmm baddbmm_backward reduce reduce_backward"),
    kernel("aten::bmm", "", "bmm", "bmm(Tensor self, Tensor mat2) -> Tensor", "Products",
           "baddbmm baddbmm_backward"),
    composition("aten::einsum", "einsum",
                "einsum(str equation, Tensor[] tensors, int[]? path=None) -> Tensor", "Einsum",
                "gemm reduce reduce_backward"),
    kernel("aten::mm", "", "mm", "mm(Tensor self, Tensor mat2) -> Tensor", "Products",
           "baddbmm baddbmm_backward"),
    kernel("aten::addmm", "", "addmm",
           "addmm(Tensor self, Tensor mat1, Tensor mat2, Scalar beta=1, Scalar alpha=1) -> Tensor",
           "Products", "baddbmm baddbmm_backward reduce reduce_backward"),
    kernel("aten::baddbmm", "", "baddbmm",
           "baddbmm(Tensor self, Tensor batch1, Tensor batch2, Scalar beta=1, Scalar alpha=1) -> "
           "Tensor",
           "Products", "baddbmm baddbmm_backward reduce reduce_backward"),

    // Normalisation.
    kernel("aten::batch_norm", "", "batch_norm",
           "batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, "
           "Tensor? running_var, bool training, float momentum, float eps, bool cudnn_enabled) "
           "-> Tensor",
           "BatchNorm2d, training", "batch_norm_train batch_norm_eval batch_norm_backward"),
    kernel("aten::layer_norm", "", "layer_norm",
           "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, "
           "Tensor? bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensor",
           "LayerNorm", "layer_norm layer_norm_backward"),
    kernel("aten::group_norm", "", "group_norm",
           "group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, "
           "float eps=1e-05, bool cudnn_enabled=True) -> Tensor",
           "Normalisation", "group_norm group_norm_backward"),

    // Activations.
    kernel("aten::relu", "", "relu", "relu(Tensor self) -> Tensor", "ReLU", "relu relu_backward"),
    in_place("aten::relu_", "relu"),
    kernel("aten::gelu", "", "gelu", "gelu(Tensor self, str approximate='none') -> Tensor", "GELU",
           "gelu gelu_backward gelu_tanh gelu_tanh_backward"),
    VT_ACTIVATION("sigmoid", "(Tensor self) -> Tensor", "sigmoid sigmoid_backward"),
    in_place("aten::sigmoid_", "sigmoid"),
    VT_ACTIVATION("tanh", "(Tensor self) -> Tensor", "tanh tanh_backward"),
    in_place("aten::tanh_", "tanh"),
    VT_ACTIVATION("silu", "(Tensor self) -> Tensor", "silu silu_backward"),
    in_place("aten::silu_", "silu"),
    VT_ACTIVATION("hardsigmoid", "(Tensor self) -> Tensor", "hardsigmoid hardsigmoid_backward"),
    in_place("aten::hardsigmoid_", "hardsigmoid"),
    VT_ACTIVATION("hardswish", "(Tensor self) -> Tensor", "hardswish hardswish_backward"),
    in_place("aten::hardswish_", "hardswish"),
    VT_ACTIVATION("hardtanh", "(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor",
                  "hardtanh hardtanh_backward"),
    in_place("aten::hardtanh_", "hardtanh"),
    kernel("aten::relu6", "", "relu6", "relu6(Tensor self) -> Tensor", "hardtanh",
           "hardtanh hardtanh_backward"),
    in_place("aten::relu6_", "relu6"),
    VT_ACTIVATION("leaky_relu", "(Tensor self, Scalar negative_slope=0.01) -> Tensor",
                  "leaky_relu leaky_relu_backward"),
    in_place("aten::leaky_relu_", "leaky_relu"),
    kernel("aten::elu", "", "elu",
           "elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor",
           "elu", "elu elu_backward", /*own_alpha=*/true),
    in_place("aten::elu_", "elu"),
    VT_ACTIVATION("softplus", "(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor",
                  "softplus softplus_backward"),
    VT_ACTIVATION("selu", "(Tensor self) -> Tensor", "selu selu_backward"),
    in_place("aten::selu_", "selu"),
    kernel("aten::celu", "", "celu", "celu(Tensor self, Scalar alpha=1.0) -> Tensor", "celu",
           "celu celu_backward", /*own_alpha=*/true),
    in_place("aten::celu_", "celu"),
    VT_ACTIVATION("mish", "(Tensor self) -> Tensor", "mish mish_backward"),
    in_place("aten::mish_", "mish"),
    VT_ACTIVATION("log_sigmoid", "(Tensor self) -> Tensor", "log_sigmoid log_sigmoid_backward"),
    VT_ACTIVATION("hardshrink", "(Tensor self, Scalar lambd=0.5) -> Tensor",
                  "hardshrink hardshrink_backward"),
    VT_ACTIVATION("softshrink", "(Tensor self, Scalar lambd=0.5) -> Tensor",
                  "softshrink softshrink_backward"),
    VT_ACTIVATION("threshold", "(Tensor self, Scalar threshold, Scalar value) -> Tensor",
                  "threshold threshold_backward"),
    in_place("aten::threshold_", "threshold"),
    VT_ACTIVATION("exp", "(Tensor self) -> Tensor", "exp exp_backward"),
    in_place("aten::exp_", "exp"),
    VT_ACTIVATION("log", "(Tensor self) -> Tensor", "log log_backward"),
    in_place("aten::log_", "log"),
    composition("aten::glu", "glu", "glu(Tensor self, int dim=-1) -> Tensor", "glu",
                "sigmoid sigmoid_backward"),
    composition("aten::prelu", "prelu", "prelu(Tensor self, Tensor weight) -> Tensor", "prelu",
                "reduce reduce_backward"),

    // Random draws: the task's dropout stream.
    kernel("aten::dropout", "", "dropout", "dropout(Tensor input, float p, bool train) -> Tensor",
           "Dropout", "dropout dropout_backward"),
    in_place("aten::dropout_", "dropout"),
    kernel("aten::feature_dropout", "", "feature_dropout",
           "feature_dropout(Tensor input, float p, bool train) -> Tensor", "Random operators",
           "feature_dropout feature_dropout_backward"),
    in_place("aten::feature_dropout_", "feature_dropout"),
    composition("aten::alpha_dropout", "alpha_dropout",
                "alpha_dropout(Tensor input, float p, bool train) -> Tensor", "Random operators",
                "bernoulli"),
    in_place("aten::alpha_dropout_", "alpha_dropout"),
    kernel("aten::rand", "", "rand",
           "rand(int[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
           "bool? pin_memory=None) -> Tensor",
           "Random operators", "uniform"),
    kernel("aten::rand_like", "", "rand_like",
           "rand_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, "
           "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> "
           "Tensor",
           "Random operators", "uniform"),
    composition("aten::rrelu", "rrelu",
                "rrelu(Tensor self, Scalar lower=0.125, Scalar upper=0.3333333333333333, "
                "bool training=False, Generator? generator=None) -> Tensor",
                "Random operators", "uniform leaky_relu leaky_relu_backward"),
    in_place("aten::rrelu_", "rrelu"),
    {"aten::bernoulli_", "float", F::kInPlace, "bernoulli",
     "bernoulli(Tensor self, float p=0.5, Generator? generator=None) -> Tensor", "Random operators",
     "bernoulli"},
    kernel("aten::randint", "", "randint",
           "randint(int high, int[] size, *, ScalarType? dtype=None, Layout? layout=None, "
           "Device? device=None, bool? pin_memory=None) -> Tensor",
           "Random operators", "randint"),
    kernel("aten::randint", "low", "randint_low",
           "randint_low(int low, int high, int[] size, *, ScalarType? dtype=None, "
           "Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
           "Random operators", "randint"),
    kernel("aten::bernoulli", "", "bernoulli_of",
           "bernoulli_of(Tensor self, Generator? generator=None) -> Tensor", "Random operators",
           "bernoulli_of"),
    {"aten::uniform_", "", F::kInPlace, "uniform",
     "uniform(Tensor self, float from=0., float to=1., Generator? generator=None) -> Tensor",
     "Random operators", "uniform"},
    kernel("aten::randn", "", "randn",
           "randn(int[] size, *, ScalarType? dtype=None, Layout? layout=None, "
           "Device? device=None, bool? pin_memory=None) -> Tensor",
           "Random operators", "normal"),
    kernel("aten::randn_like", "", "randn_like",
           "randn_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, "
           "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> "
           "Tensor",
           "Random operators", "normal"),
    {"aten::normal_", "", F::kInPlace, "normal",
     "normal(Tensor self, float mean=0., float std=1., Generator? generator=None) -> Tensor",
     "Random operators", "normal"},

    // Pooling and resampling.
    kernel("aten::max_pool2d", "", "max_pool2d",
           "max_pool2d(Tensor self, int[] kernel_size, int[] stride, int[] padding, "
           "int[] dilation, bool ceil_mode) -> Tensor",
           "Pooling", "max_pool2d max_pool2d_backward"),
    kernel("aten::max_pool2d_with_indices", "", "max_pool2d_with_indices",
           "max_pool2d_with_indices(Tensor self, int[] kernel_size, int[] stride, int[] padding, "
           "int[] dilation, bool ceil_mode) -> (Tensor, Tensor)",
           "Pooling", "max_pool2d max_pool2d_backward"),
    kernel("aten::avg_pool2d", "", "avg_pool2d",
           "avg_pool2d(Tensor self, int[] kernel_size, int[] stride, int[] padding, "
           "bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor",
           "Pooling", "avg_pool2d avg_pool2d_backward"),
    kernel("aten::adaptive_avg_pool2d", "", "adaptive_avg_pool",
           "adaptive_avg_pool(Tensor self, int[] output_size) -> Tensor", "Pooling",
           "adaptive_avg_pool2d adaptive_avg_pool2d_backward row_mean row_mean_backward"),
    kernel("aten::adaptive_max_pool2d", "", "adaptive_max_pool",
           "adaptive_max_pool(Tensor self, int[] output_size) -> (Tensor, Tensor)", "Pooling",
           "adaptive_max_pool2d max_pool2d_backward"),
    kernel("aten::adaptive_avg_pool3d", "", "adaptive_avg_pool3d",
           "adaptive_avg_pool3d(Tensor self, int[] output_size) -> Tensor", "Spatial mean",
           "row_mean row_mean_backward"),
    kernel("aten::upsample_bilinear2d", "vec", "upsample_bilinear2d",
           "upsample_bilinear2d(Tensor input, int[]? output_size, bool align_corners, "
           "float[]? scale_factors) -> Tensor",
           "Pooling", "upsample_bilinear2d upsample_bilinear2d_backward"),
    kernel("aten::upsample_nearest1d", "vec", "upsample_nearest",
           "upsample_nearest(Tensor input, int[]? output_size, float[]? scale_factors) -> Tensor",
           "Pooling", "upsample_nearest upsample_nearest_backward"),
    kernel("aten::upsample_nearest2d", "vec", "upsample_nearest", "", "Pooling",
           "upsample_nearest upsample_nearest_backward"),
    kernel("aten::upsample_nearest3d", "vec", "upsample_nearest", "", "Pooling",
           "upsample_nearest upsample_nearest_backward"),

    // Reductions and softmax.
    kernel("aten::mean", "dim", "mean",
           "mean(Tensor self, int[]? dim, bool keepdim=False, ScalarType? dtype=None) -> Tensor",
           "Reductions", "reduce reduce_backward row_mean row_mean_backward"),
    kernel("aten::mean", "", "mean_all", "mean_all(Tensor self, ScalarType? dtype=None) -> Tensor",
           "Reductions", "reduce reduce_backward"),
    kernel("aten::sum", "dim_IntList", "sum",
           "sum(Tensor self, int[]? dim, bool keepdim=False, ScalarType? dtype=None) -> Tensor",
           "Reductions", "reduce reduce_backward"),
    kernel("aten::sum", "", "sum_all", "sum_all(Tensor self, ScalarType? dtype=None) -> Tensor",
           "Reductions", "reduce reduce_backward"),
    kernel("aten::amax", "", "amax",
           "amax(Tensor self, int[] dim=[], bool keepdim=False) -> Tensor", "Reductions",
           "reduce reduce_backward"),
    kernel("aten::logsumexp", "", "logsumexp",
           "logsumexp(Tensor self, int[] dim, bool keepdim=False) -> Tensor", "Reductions",
           "reduce reduce_backward"),
    kernel("aten::softmax", "int", "softmax",
           "softmax(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", "Reductions",
           "softmax softmax_backward"),
    kernel("aten::log_softmax", "int", "log_softmax",
           "log_softmax(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", "Reductions",
           "log_softmax log_softmax_backward"),

    // Element-wise operators whose operands broadcast (the broadcast's gradient is a reduce).
    kernel("aten::add", "Tensor", "add", "add(Tensor self, Tensor other, Scalar alpha=1) -> Tensor",
           "Broadcasting", "reduce reduce_backward"),
    kernel("aten::sub", "Tensor", "sub", "sub(Tensor self, Tensor other, Scalar alpha=1) -> Tensor",
           "Broadcasting", "reduce reduce_backward"),
    kernel("aten::mul", "Tensor", "mul", "mul(Tensor self, Tensor other) -> Tensor", "Broadcasting",
           "reduce reduce_backward"),
    kernel("aten::div", "Tensor", "div", "div(Tensor self, Tensor other) -> Tensor", "Broadcasting",
           "reduce reduce_backward"),
    composition("aten::div", "div_mode",
                "div_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor",
                "Division with a rounding mode", "reduce reduce_backward", "Tensor_mode"),
    composition("aten::div", "div_scalar_mode",
                "div_scalar_mode(Tensor self, Scalar other, *, str? rounding_mode) -> Tensor",
                "Division with a rounding mode", "", "Scalar_mode"),
    kernel("aten::add_", "Tensor", "add_",
           "add_(Tensor(a!) self, Tensor other, Scalar alpha=1) -> Tensor(a!)", "Broadcasting",
           "reduce reduce_backward"),
    kernel("aten::sub_", "Tensor", "sub_",
           "sub_(Tensor(a!) self, Tensor other, Scalar alpha=1) -> Tensor(a!)", "Broadcasting",
           "reduce reduce_backward"),
    kernel("aten::mul_", "Tensor", "mul_", "mul_(Tensor(a!) self, Tensor other) -> Tensor(a!)",
           "Broadcasting", "reduce reduce_backward"),
    kernel("aten::div_", "Tensor", "div_", "div_(Tensor(a!) self, Tensor other) -> Tensor(a!)",
           "Broadcasting", "reduce reduce_backward"),
    kernel("aten::where", "self", "where",
           "where(Tensor condition, Tensor self, Tensor other) -> Tensor", "Broadcasting",
           "reduce reduce_backward"),
    kernel("aten::maximum", "", "maximum", "maximum(Tensor self, Tensor other) -> Tensor",
           "Broadcasting", "reduce reduce_backward"),
    kernel("aten::minimum", "", "minimum", "minimum(Tensor self, Tensor other) -> Tensor",
           "Broadcasting", "reduce reduce_backward"),
    // torch.max(a, b): the element-wise maximum.
    kernel("aten::max", "other", "maximum", "", "Broadcasting", "reduce reduce_backward"),
    kernel("aten::min", "other", "minimum", "", "Broadcasting", "reduce reduce_backward"),
    kernel("aten::expand", "", "expand",
           "expand(Tensor self, int[] size, bool implicit=False) -> Tensor", "Broadcasting",
           "reduce reduce_backward"),
    kernel("aten::repeat", "", "repeat", "repeat(Tensor self, int[] repeats) -> Tensor",
           "Broadcasting", "reduce reduce_backward"),
    kernel("aten::expand_as", "", "expand_as", "expand_as(Tensor self, Tensor other) -> Tensor",
           "Broadcasting", "reduce reduce_backward"),
    composition("aten::embedding_bag", "embedding_bag",
                "embedding_bag(Tensor weight, Tensor indices, Tensor offsets, "
                "bool scale_grad_by_freq, int mode, bool sparse, Tensor? per_sample_weights, "
                "bool include_last_offset, int? padding_idx) -> (Tensor, Tensor, Tensor, Tensor)",
                "EmbeddingBag", "embedding embedding_backward reduce reduce_backward",
                "padding_idx"),
    // Indexing (script/indexing.cpp).
    kernel("aten::index", "Tensor", "index", "index(Tensor self, Tensor?[] indices) -> Tensor",
           "Indexing", "embedding embedding_backward"),
    kernel("aten::index_put_", "", "index_put_",
           "index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False) "
           "-> Tensor(a!)",
           "Indexing", "reduce reduce_backward"),
    kernel("aten::embedding", "", "embedding",
           "embedding(Tensor weight, Tensor indices, int padding_idx=-1, "
           "bool scale_grad_by_freq=False, bool sparse=False) -> Tensor",
           "Embedding", "embedding embedding_backward"),

    // Losses.
    kernel("aten::cross_entropy_loss", "", "cross_entropy",
           "cross_entropy(Tensor self, Tensor target, Tensor? weight=None, int reduction=1, "
           "int ignore_index=-100, float label_smoothing=0.0) -> Tensor",
           "cross_entropy",
           "cross_entropy cross_entropy_backward cross_entropy_smoothed "
           "cross_entropy_smoothed_backward"),
    kernel("aten::nll_loss_nd", "", "nll_loss",
           "nll_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=1, "
           "int ignore_index=-100) -> Tensor",
           "Losses, further forms", "nll_loss nll_loss_backward"),
    kernel("aten::nll_loss", "", "nll_loss", "", "Losses, further forms",
           "nll_loss nll_loss_backward"),
    kernel("aten::binary_cross_entropy_with_logits", "", "bce_with_logits",
           "bce_with_logits(Tensor self, Tensor target, Tensor? weight=None, "
           "Tensor? pos_weight=None, int reduction=1) -> Tensor",
           "Losses, further forms", "bce_with_logits bce_with_logits_backward"),
    kernel("aten::mse_loss", "", "mse_loss",
           "mse_loss(Tensor self, Tensor target, int reduction=1) -> Tensor", "mse",
           "mse mse_backward"),

    // Recurrent layers.
    kernel("aten::lstm", "input", "lstm",
           "lstm(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, "
           "float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor, "
           "Tensor)",
           "Recurrent layers", "rnn rnn_backward"),
    kernel("aten::gru", "input", "gru",
           "gru(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, "
           "float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)",
           "Recurrent layers", "rnn rnn_backward"),
    kernel("aten::rnn_tanh", "input", "rnn_tanh",
           "rnn_tanh(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, "
           "float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)",
           "Recurrent layers", "rnn rnn_backward"),
    kernel("aten::rnn_relu", "input", "rnn_relu",
           "rnn_relu(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, "
           "float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)",
           "Recurrent layers", "rnn rnn_backward"),

    // Decompositions (decompositions.py): losses, norms, moments, and layers of other kernels.
    decomposition("aten::l1_loss", "", "l1_loss", "reduce reduce_backward"),
    decomposition("aten::smooth_l1_loss", "", "smooth_l1_loss", "reduce reduce_backward"),
    decomposition("aten::huber_loss", "", "huber_loss", "reduce reduce_backward"),
    decomposition("aten::binary_cross_entropy", "", "binary_cross_entropy",
                  "log log_backward reduce reduce_backward"),
    decomposition("aten::kl_div", "", "kl_div", "exp exp_backward log log_backward reduce"),
    decomposition("aten::soft_margin_loss", "", "soft_margin_loss",
                  "exp exp_backward log log_backward reduce reduce_backward"),
    decomposition("aten::hinge_embedding_loss", "", "hinge_embedding_loss",
                  "reduce reduce_backward"),
    decomposition("aten::margin_ranking_loss", "", "margin_ranking_loss", "reduce reduce_backward"),
    decomposition("aten::cosine_embedding_loss", "", "cosine_embedding_loss",
                  "reduce reduce_backward"),
    decomposition("aten::poisson_nll_loss", "", "poisson_nll_loss",
                  "exp exp_backward log log_backward reduce reduce_backward"),
    decomposition("aten::multi_margin_loss", "", "multi_margin_loss",
                  "embedding embedding_backward reduce reduce_backward"),
    decomposition("aten::pairwise_distance", "", "pairwise_distance", "reduce reduce_backward"),
    decomposition("aten::triplet_margin_loss", "", "triplet_margin_loss", "reduce reduce_backward"),
    // At exponents other than 2, 3, 0.5 and -1 (there LibTorch's own pow is exact: below).
    decomposition("aten::pow", "Tensor_Scalar", "pow__Tensor_Scalar",
                  "exp exp_backward log log_backward"),
    decomposition("aten::linalg_vector_norm", "", "linalg_vector_norm", "reduce reduce_backward"),
    decomposition("aten::norm", "ScalarOpt_dim", "norm__ScalarOpt_dim", "reduce reduce_backward"),
    decomposition("aten::norm", "Scalar", "norm__Scalar", "reduce reduce_backward"),
    decomposition("aten::var", "", "var", "reduce reduce_backward"),
    decomposition("aten::var", "dim", "var__dim", "reduce reduce_backward"),
    decomposition("aten::var", "correction", "var__correction", "reduce reduce_backward"),
    decomposition("aten::std", "", "std", "reduce reduce_backward"),
    decomposition("aten::std", "dim", "std__dim", "reduce reduce_backward"),
    decomposition("aten::std", "correction", "std__correction", "reduce reduce_backward"),
    decomposition("aten::instance_norm", "", "instance_norm", "group_norm group_norm_backward"),
    decomposition("aten::max_pool1d", "", "max_pool1d", "max_pool2d max_pool2d_backward"),
    decomposition("aten::max_pool1d_with_indices", "", "max_pool1d_with_indices",
                  "max_pool2d max_pool2d_backward"),
    decomposition("aten::avg_pool1d", "", "avg_pool1d", "avg_pool2d avg_pool2d_backward"),
    decomposition("aten::adaptive_avg_pool1d", "", "adaptive_avg_pool1d",
                  "adaptive_avg_pool2d adaptive_avg_pool2d_backward row_mean row_mean_backward"),
    decomposition("aten::max_pool3d", "", "max_pool3d", "max_pool2d max_pool2d_backward"),
    decomposition("aten::avg_pool3d", "", "avg_pool3d", "avg_pool2d avg_pool2d_backward"),
    decomposition("aten::channel_shuffle", "", "channel_shuffle", ""),
    decomposition("aten::pad", "", "pad", "reduce reduce_backward"),

    // LibTorch's own, rounding nothing: views, copies, shapes, allocations, containers.
    exact("aten::flatten"),
    exact("aten::view"),
    exact("aten::reshape"),
    exact("aten::view_as"),
    exact("aten::reshape_as"),
    exact("aten::permute"),
    exact("aten::transpose"),
    exact("aten::t"),
    exact("aten::contiguous"),
    exact("aten::unsqueeze"),
    exact("aten::squeeze"),
    exact("aten::slice"),
    exact("aten::select"),
    exact("aten::cat"),
    exact("aten::stack"),
    exact("aten::clone"),
    exact("aten::detach"),
    exact("aten::chunk"),
    exact("aten::split"),
    exact("aten::unbind"),
    exact("aten::narrow"),
    exact("aten::unflatten"),
    exact("aten::size"),
    exact("aten::dim"),
    exact("aten::numel"),
    exact("aten::len"),
    exact("aten::__getitem__"),
    exact("aten::_set_item"),
    exact("aten::append"),
    exact("aten::list"),
    exact("aten::__is__"),
    exact("aten::__isnot__"),
    exact("aten::is_floating_point"),
    exact("aten::Bool"),
    exact("aten::item"),
    exact("aten::zeros_like"),
    exact("aten::ones_like"),
    exact("aten::empty_like"),
    exact("aten::full_like"),
    exact("aten::zeros"),
    exact("aten::ones"),
    exact("aten::empty"),
    exact("aten::full"),
    exact("aten::new_zeros"),
    exact("aten::new_ones"),
    exact("aten::new_empty"),
    exact("aten::new_full"),
    exact("aten::arange"),
    exact("aten::tensor"),
    exact("aten::scalar_tensor"),
    exact("aten::fill_"),
    exact("aten::zero_"),
    exact("aten::copy_"),
    exact("aten::to"),
    exact("aten::type_as"),
    // Comparisons and selections (max and min: "Masks and comparisons").
    exact("aten::eq"),
    exact("aten::ne"),
    exact("aten::lt"),
    exact("aten::le"),
    exact("aten::gt"),
    exact("aten::ge"),
    exact("aten::logical_not"),
    exact("aten::logical_and"),
    exact("aten::logical_or"),
    exact("aten::any"),
    exact("aten::all"),
    exact("aten::masked_fill"),
    exact("aten::masked_fill_"),
    exact("aten::where"),
    exact("aten::abs"),
    exact("aten::clamp"),
    exact("aten::clamp_"),
    exact("aten::clamp_min"),
    exact("aten::clamp_max"),
    exact("aten::clamp_min_"),
    exact("aten::clamp_max_"),
    exact("aten::argmax"),
    exact("aten::argmin"),
    exact("aten::max"),
    exact("aten::min"),
    exact("aten::sign"),
    exact("aten::sgn"),
    exact("aten::one_hot"),
    exact("aten::max_pool2d_with_indices_backward"),
    // One IEEE operation per element, identical at every vector width (pow at the exponents
    // LibTorch computes so: rewrite.cpp's caveats).
    exact("aten::add"),
    exact("aten::add_"),
    exact("aten::sub"),
    exact("aten::sub_"),
    exact("aten::mul"),
    exact("aten::mul_"),
    exact("aten::div"),
    exact("aten::div_"),
    exact("aten::rsub"),
    exact("aten::neg"),
    exact("aten::sqrt"),
    exact("aten::rsqrt"),
    exact("aten::reciprocal"),
    exact("aten::square"),
    exact("aten::pow"),
    // LibTorch's scan: each prefix a binary64 sum in order, rounded once; the gradient the scan
    // reversed.
    exact("aten::cumsum"),
    // Rounding to an integer, exact in IEEE arithmetic; their gradients +0.
    exact("aten::floor"),
    exact("aten::ceil"),
    exact("aten::trunc"),
    // Moves whose gradients are the inverse moves (aten::pad is a decomposition).
    move("aten::flip"),
    move("aten::roll"),
    move("aten::pixel_shuffle"),
    move("aten::pixel_unshuffle"),
    move("aten::triu"),
    move("aten::tril"),
    move("aten::constant_pad_nd"),
};
#undef VT_ACTIVATION

}  // namespace

std::span<const PortableOp> portable_ops() { return kOps; }

}  // namespace vt::training

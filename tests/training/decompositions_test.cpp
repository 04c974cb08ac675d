// The decompositions (training/script/decompositions.py) as veritrain runs them against the same
// functions run on numpy (reference/decompositions_ref.py): each operator called by a module,
// rewritten portable and run forward on values with ties, ±0, subnormals, ±inf and NaN, then
// replayed from the definitions alone, bit for bit.
#include <gtest/gtest.h>
#include <torch/script.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "tests/test_util.h"
#include "training/script/rewrite.h"

namespace vt::training {
namespace {

using torch::Tensor;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Values where the decompositions branch: zeros of both signs, ties, a subnormal, the edges of
// exp and log, infinities and NaN.
const std::vector<float> kEdges = {0.0f, -0.0f,  1.0f,    -1.0f, 0.5f,   -0.5f, 2.0f,
                                   3.0f, 1e-40f, -1e-40f, 1e30f, -1e30f, 88.8f, -104.0f,
                                   kInf, -kInf,  NAN,     0.25f, 1.5f,   -2.5f};

Tensor values(const std::vector<int64_t>& shape, int seed, bool edges = true) {
  Tensor t = torch::empty(shape);
  float* p = t.data_ptr<float>();
  std::uint32_t s = 2463534242u + static_cast<std::uint32_t>(seed) * 977u;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    const float u = static_cast<float>(s % 20001u) / 10000.0f - 1.0f;  // [-1, 1]
    p[i] = edges && i % 3 == 0 ? kEdges[(s >> 8) % kEdges.size()] : 2.5f * u;
  }
  return t;
}
// Probabilities with 0 and 1 exactly among them.
Tensor probabilities(const std::vector<int64_t>& shape, int seed) {
  Tensor t = values(shape, seed, false).abs().clamp(0, 1);
  t.view(-1)[0] = 0.0f, t.view(-1)[1] = 1.0f;
  return t;
}
Tensor signs(const std::vector<int64_t>& shape, int seed) {
  return torch::where(values(shape, seed, false) > 0, 1.0f, -1.0f);
}

nlohmann::json encode(const Tensor& t) {
  const Tensor c = t.contiguous();
  nlohmann::json data = nlohmann::json::array();
  std::string dtype = "f32";
  if (c.scalar_type() == at::kFloat) {
    for (int64_t i = 0; i < c.numel(); ++i) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, c.data_ptr<float>() + i, 4);
      data.push_back(bits);
    }
  } else if (c.scalar_type() == at::kBool) {
    dtype = "bool";
    for (int64_t i = 0; i < c.numel(); ++i) data.push_back(c.data_ptr<bool>()[i]);
  } else {
    dtype = "i64";
    const Tensor l = c.to(at::kLong);
    for (int64_t i = 0; i < l.numel(); ++i) data.push_back(l.data_ptr<int64_t>()[i]);
  }
  return {{"dtype", dtype}, {"shape", c.sizes().vec()}, {"data", data}};
}

struct Case {
  std::string name, function;
  std::string call;  // the forward's return expression over tensors t0, t1, ...
  std::vector<Tensor> tensors;
  nlohmann::json args;  // the function's arguments: "t0" ... for the tensors, constants as is
};

std::vector<Case> cases() {
  const Tensor a = values({4, 5}, 1), b = values({4, 5}, 2), c = values({4, 5}, 3);
  const Tensor p = probabilities({4, 5}, 4), q = probabilities({4, 5}, 5);
  const Tensor s = signs({4, 5}, 6), s1 = signs({4}, 7), w = values({4, 5}, 8, false).abs();
  const Tensor x3 = values({2, 3, 9}, 9), x4 = values({2, 4, 5, 6}, 10);
  const Tensor y = torch::tensor({0, 4, 2, 2}, at::kLong), cw = values({5}, 11, false).abs();
  const Tensor gw = values({4}, 12, false), gb = values({4}, 13, false);
  const nlohmann::json null = nullptr;
  return {
      {"l1_none", "l1_loss", "torch.l1_loss(t0, t1, 0)", {a, b}, {"t0", "t1", 0}},
      {"l1_mean", "l1_loss", "torch.l1_loss(t0, t1, 1)", {a, b}, {"t0", "t1", 1}},
      {"l1_sum", "l1_loss", "torch.l1_loss(t0, t1, 2)", {a, b}, {"t0", "t1", 2}},
      {"smooth_l1",
       "smooth_l1_loss",
       "torch.smooth_l1_loss(t0, t1, 0, 0.5)",
       {a, b},
       {"t0", "t1", 0, 0.5}},
      {"smooth_l1_beta0",
       "smooth_l1_loss",
       "torch.smooth_l1_loss(t0, t1, 1, 0.0)",
       {a, b},
       {"t0", "t1", 1, 0.0}},
      {"huber", "huber_loss", "torch.huber_loss(t0, t1, 0, 1.25)", {a, b}, {"t0", "t1", 0, 1.25}},
      {"bce",
       "binary_cross_entropy",
       "torch.binary_cross_entropy(t0, t1, None, 0)",
       {p, q},
       {"t0", "t1", null, 0}},
      {"bce_weighted",
       "binary_cross_entropy",
       "torch.binary_cross_entropy(t0, t1, t2, 1)",
       {p, q, w},
       {"t0", "t1", "t2", 1}},
      {"kl_div",
       "kl_div",
       "torch.kl_div(t0, t1, 0, log_target=False)",
       {a, q},
       {"t0", "t1", 0, false}},
      {"kl_div_log",
       "kl_div",
       "torch.kl_div(t0, t1, 2, log_target=True)",
       {a, b},
       {"t0", "t1", 2, true}},
      {"soft_margin",
       "soft_margin_loss",
       "torch.soft_margin_loss(t0, t1, 0)",
       {a, s},
       {"t0", "t1", 0}},
      {"hinge",
       "hinge_embedding_loss",
       "torch.hinge_embedding_loss(t0, t1, 1.0, 0)",
       {a, s},
       {"t0", "t1", 1.0, 0}},
      {"margin_ranking",
       "margin_ranking_loss",
       "torch.margin_ranking_loss(t0, t1, t2, 0.1, 0)",
       {a.select(1, 0), b.select(1, 0), s1},
       {"t0", "t1", "t2", 0.1, 0}},
      {"cosine_embedding",
       "cosine_embedding_loss",
       "torch.cosine_embedding_loss(t0, t1, t2, 0.1, 0)",
       {a, b, s1},
       {"t0", "t1", "t2", 0.1, 0}},
      {"poisson_log",
       "poisson_nll_loss",
       "torch.poisson_nll_loss(t0, t1, True, False, 1e-8, 0)",
       {a, q},
       {"t0", "t1", true, false, 1e-8, 0}},
      {"poisson_full",
       "poisson_nll_loss",
       "torch.poisson_nll_loss(t0, t1, False, True, 1e-8, 0)",
       {w, torch::mul(q, 3.0)},
       {"t0", "t1", false, true, 1e-8, 0}},
      {"multi_margin",
       "multi_margin_loss",
       "torch.multi_margin_loss(t0, t1, 1, 1.0, None, 0)",
       {a, y},
       {"t0", "t1", 1.0, 1.0, null, 0}},
      {"multi_margin_squared",
       "multi_margin_loss",
       "torch.multi_margin_loss(t0, t1, 2, 0.5, t2, 1)",
       {a, y, cw},
       {"t0", "t1", 2.0, 0.5, "t2", 1}},
      {"pairwise_distance",
       "pairwise_distance",
       "torch.pairwise_distance(t0, t1, 2.0, 1e-6, False)",
       {a, b},
       {"t0", "t1", 2.0, 1e-6, false}},
      {"triplet",
       "triplet_margin_loss",
       "torch.triplet_margin_loss(t0, t1, t2, 1.0, 2.0, 1e-6, True, 0)",
       {a, b, c},
       {"t0", "t1", "t2", 1.0, 2.0, 1e-6, true, 0}},
      {"vector_norm",
       "linalg_vector_norm",
       "torch.linalg_vector_norm(t0, 2, [1], True)",
       {a},
       {"t0", 2.0, {1}, true, null}},
      {"norm_dim",
       "norm__ScalarOpt_dim",
       "torch.norm(t0, 2.0, [0], False)",
       {a},
       {"t0", 2.0, {0}, false}},
      {"norm", "norm__Scalar", "torch.norm(t0, 2)", {values({3, 4}, 14, false)}, {"t0", 2.0}},
      {"var", "var", "torch.var(t0, True)", {values({3, 4}, 15, false)}, {"t0", true}},
      {"var_dim", "var__dim", "torch.var(t0, [1], False, True)", {a}, {"t0", {1}, false, true}},
      {"var_correction",
       "var__correction",
       "torch.var(t0, [0, 1], correction=0)",
       {a},
       {"t0", {0, 1}, 0, false}},
      {"std_dim",
       "std__dim",
       "torch.std(t0, [0], True, False)",
       {values({4, 5}, 16, false)},
       {"t0", {0}, true, false}},
      {"instance_norm",
       "instance_norm",
       "torch.instance_norm(t0, t1, t2, None, None, True, 0.1, 1e-5, False)",
       {values({2, 4, 5, 6}, 17, false), gw, gb},
       {"t0", "t1", "t2", null, null, true, 0.1, 1e-5, false}},
      {"max_pool1d",
       "max_pool1d",
       "torch.max_pool1d(t0, [3], [2], [1], [1], False)",
       {x3},
       {"t0", {3}, {2}, {1}, {1}, false}},
      {"avg_pool1d",
       "avg_pool1d",
       "torch.avg_pool1d(t0, [3], [2], [1], False, True)",
       {values({2, 3, 9}, 18, false)},
       {"t0", {3}, {2}, {1}, false, true}},
      {"adaptive_avg_pool1d",
       "adaptive_avg_pool1d",
       "torch.adaptive_avg_pool1d(t0, [4])",
       {values({2, 3, 9}, 19, false)},
       {"t0", {4}}},
      {"max_pool3d",
       "max_pool3d",
       "torch.max_pool3d(t0, [2, 3, 3], [1, 2, 2], [0, 1, 1], [1, 1, 1], True)",
       {values({2, 3, 4, 7, 6}, 20)},
       {"t0", {2, 3, 3}, {1, 2, 2}, {0, 1, 1}, {1, 1, 1}, true}},
      {"avg_pool3d",
       "avg_pool3d",
       "torch.avg_pool3d(t0, [2, 2, 3], [2, 1, 2], [1, 0, 1], True, False, None)",
       {values({2, 3, 5, 6, 7}, 21, false)},
       {"t0", {2, 2, 3}, {2, 1, 2}, {1, 0, 1}, true, false, null}},
      {"pow_fraction", "pow__Tensor_Scalar", "torch.pow(t0, 0.75)", {a}, {"t0", 0.75}},
      {"pow_negative", "pow__Tensor_Scalar", "torch.pow(t0, -2.5)", {a}, {"t0", -2.5}},
      {"pow_even", "pow__Tensor_Scalar", "torch.pow(t0, 4)", {a}, {"t0", 4.0}},
      {"pow_odd", "pow__Tensor_Scalar", "torch.pow(t0, -3.0)", {a}, {"t0", -3.0}},
      {"pow_zero", "pow__Tensor_Scalar", "torch.pow(t0, 0.0)", {a}, {"t0", 0.0}},
      {"channel_shuffle", "channel_shuffle", "torch.channel_shuffle(t0, 2)", {x4}, {"t0", 2}},
      {"pad_reflect",
       "pad",
       "torch.pad(t0, [1, 2, 2, 1], 'reflect')",
       {x4},
       {"t0", {1, 2, 2, 1}, "reflect", null}},
      {"pad_replicate",
       "pad",
       "torch.pad(t0, [2, 1], 'replicate')",
       {x4},
       {"t0", {2, 1}, "replicate", null}},
      {"pad_constant",
       "pad",
       "torch.pad(t0, [1, 1, 0, 2], 'constant', 0.5)",
       {x4},
       {"t0", {1, 1, 0, 2}, "constant", 0.5}},
  };
}

// Each case's forward in portable arithmetic, as veritrain runs a module's.
nlohmann::json run_portably(const Case& c) {
  std::string params;
  for (std::size_t i = 0; i < c.tensors.size(); ++i) params += ", t" + std::to_string(i);
  torch::jit::Module m("Case");
  m.define("def forward(self" + params + "):\n    return " + c.call + "\n");
  const Status portable = make_portable(m, c.name);
  EXPECT_TRUE(portable.ok()) << c.name << ": " << portable.error().message;
  if (!portable.ok()) return {};
  const bool optimize = torch::jit::getGraphExecutorOptimize();
  torch::jit::setGraphExecutorOptimize(false);
  std::vector<torch::jit::IValue> inputs(c.tensors.begin(), c.tensors.end());
  const torch::jit::IValue out = m.forward(inputs);
  torch::jit::setGraphExecutorOptimize(optimize);
  nlohmann::json args = nlohmann::json::array();
  for (const auto& arg : c.args) {
    const bool tensor = arg.is_string() && arg.get<std::string>().rfind('t', 0) == 0 &&
                        arg.get<std::string>().size() <= 3 &&
                        std::isdigit(static_cast<unsigned char>(arg.get<std::string>()[1]));
    args.push_back(tensor ? encode(c.tensors[std::stoul(arg.get<std::string>().substr(1))]) : arg);
  }
  return {{"name", c.name},
          {"function", c.function},
          {"args", args},
          {"outputs",
           {encode(out.isTuple() ? out.toTupleRef().elements()[0].toTensor() : out.toTensor())}}};
}

TEST(Decompositions, VeritrainRunsTheDefinitionsNumpyRuns) {
  testing::ScratchDir dir;
  nlohmann::json all = {{"cases", nlohmann::json::array()}};
  for (const Case& c : cases()) all["cases"].push_back(run_portably(c));
  ASSERT_TRUE(write_file_atomic(dir / "cases.json", all.dump()).ok());
  const std::string ref = "/usr/bin/python3 " VT_SOURCE_DIR "/reference/decompositions_ref.py ";
  auto r = testing::run_command(ref + (dir / "cases.json").string(), dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // The control: one bit of one output moved is a difference the replay names.
  auto& bits = all["cases"][0]["outputs"][0]["data"];
  bits[1] = bits[1].get<std::uint32_t>() ^ 1u;
  ASSERT_TRUE(write_file_atomic(dir / "moved.json", all.dump()).ok());
  r = testing::run_command(ref + (dir / "moved.json").string(), dir.path());
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("l1_none output 0: 1 of 20 values differ; first at 1"), std::string::npos)
      << r.out;
}

// A check of a decomposition that fails for the module's constants refuses the module when it is
// loaded, naming the operator, the module's line and the check.
TEST(Decompositions, AFailingCheckRefusesTheModuleNamingTheOperator) {
  torch::jit::Module m("Case");
  m.define("def forward(self, x):\n    return torch.norm(x, 3.0, [1], False)\n");
  const Status portable = make_portable(m, "cubed.pt");
  ASSERT_FALSE(portable.ok());
  EXPECT_NE(portable.error().message.find("aten::norm.ScalarOpt_dim"), std::string::npos)
      << portable.error().message;
  EXPECT_NE(portable.error().message.find("p = 2 only"), std::string::npos)
      << portable.error().message;
  torch::jit::Module circular("Case");
  circular.define("def forward(self, x):\n    return torch.pad(x, [1, 1], 'circular')\n");
  const Status refused = make_portable(circular, "circular.pt");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("mode 'circular'"), std::string::npos)
      << refused.error().message;
}

}  // namespace
}  // namespace vt::training

// User models: a TorchScript module named in the task with its SHA-256.
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "common/file_io.h"
#include "common/sha256.h"
#include "tests/test_util.h"
#include "training/model/network.h"
#include "training/script/module.h"
#include "training/trainer.h"
#include "training/zoo/zoo.h"

namespace vt::training {
namespace {

// A linear classifier defined in TorchScript source, saved as a module file.
std::string write_module(const std::filesystem::path& file, bool with_forward) {
  torch::jit::Module m("Linear");
  m.register_parameter("weight", torch::randn({4, 32}) * 0.1, false);
  m.register_parameter("bias", torch::zeros({4}), false);
  m.define(with_forward
               ? "def forward(self, x):\n  return torch.matmul(x, self.weight.t()) + self.bias\n"
               : "def predict(self, x):\n  return x\n");
  m.save(file.string());
  return hex_encode(sha256(*read_file(file)));
}

Task script_task(const std::string& path, const std::string& digest) {
  Task task = *default_task("mlp", "synthetic");
  task.model = {"torchscript", {}, path, digest};
  task.dataset.options = {{"samples", 32}, {"input_dim", 32}, {"classes", 4}};
  task.batch_size = 8;
  task.steps_per_epoch = 2;
  return task;
}

TEST(TorchScript, TrainsAndReplaysIdentically) {
  testing::ScratchDir dir;
  std::string digest = write_module(dir / "model.pt", true);
  Task task = script_task("model.pt", digest);
  TrainerOptions opts;
  opts.task_dir = dir.path();
  auto trainer = Trainer::create(task, opts);
  ASSERT_TRUE(trainer.ok()) << trainer.error().message;
  Bytes before = *(*trainer)->snapshot();
  ASSERT_TRUE((*trainer)->train_epoch().ok());
  Bytes after = *(*trainer)->snapshot();
  EXPECT_NE(before, after);
  auto replay = Trainer::restore(task, before, opts);
  ASSERT_TRUE(replay.ok()) << replay.error().message;
  ASSERT_TRUE((*replay)->train_epoch().ok());
  EXPECT_TRUE(*(*replay)->snapshot() == after);
}

// LeNet-5 in TorchScript source (tanh, avg_pool2d): LibTorch's default executor runs a module's
// first calls op by op and later ones through a graph optimised on what it profiled, whose
// gradients differ. Every call must compute as the first (docs/training.md).
TEST(TorchScript, ForwardAndBackwardGiveTheSameBitsOnEveryCall) {
  testing::ScratchDir dir;
  torch::manual_seed(0);
  torch::jit::Module m("LeNet");
  const std::vector<std::pair<const char*, std::vector<std::int64_t>>> shapes = {
      {"c1w", {6, 3, 5, 5}}, {"c1b", {6}},   {"c2w", {16, 6, 5, 5}}, {"c2b", {16}},
      {"f1w", {120, 400}},   {"f1b", {120}}, {"f2w", {84, 120}},     {"f2b", {84}},
      {"f3w", {10, 84}},     {"f3b", {10}}};
  for (const auto& [name, shape] : shapes)
    m.register_parameter(name, torch::randn(shape) * 0.1, false);
  m.define(R"(
def forward(self, x):
    x = torch.avg_pool2d(torch.tanh(torch.conv2d(x, self.c1w, self.c1b)), [2, 2])
    x = torch.avg_pool2d(torch.tanh(torch.conv2d(x, self.c2w, self.c2b)), [2, 2])
    x = torch.tanh(torch.linear(x.flatten(1), self.f1w, self.f1b))
    return torch.linear(torch.tanh(torch.linear(x, self.f2w, self.f2b)), self.f3w, self.f3b)
)");
  m.save((dir / "lenet.pt").string());
  Task task = script_task("lenet.pt", hex_encode(sha256(*read_file(dir / "lenet.pt"))));
  task.determinism = Determinism::kExact;
  auto net = load_torchscript(task, dir.path());
  ASSERT_TRUE(net.ok()) << net.error().message;
  const at::Tensor x = torch::rand({8, 3, 32, 32});
  const at::Tensor y = torch::arange(8) % 10;
  std::vector<at::Tensor> grads;
  for (int call = 0; call < 5; ++call) {
    for (auto& [name, p] : (*net)->parameters()) p.mutable_grad() = at::Tensor();
    torch::nn::functional::cross_entropy((*net)->forward(x), y).backward();
    std::vector<at::Tensor> flat;
    for (auto& [name, p] : (*net)->parameters()) flat.push_back(p.grad().flatten());
    grads.push_back(torch::cat(flat));
    EXPECT_TRUE(torch::equal(grads.front(), grads.back())) << "call " << call + 1;
  }
}

TEST(TorchScript, DigestMismatchAndMissingForwardAreClearErrors) {
  testing::ScratchDir dir;
  std::string digest = write_module(dir / "model.pt", true);
  TrainerOptions opts;
  opts.task_dir = dir.path();
  auto wrong = Trainer::create(script_task("model.pt", std::string(64, 'a')), opts);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("model.sha256"), std::string::npos) << wrong.error().message;

  std::string no_forward = write_module(dir / "noforward.pt", false);
  auto missing = Trainer::create(script_task("noforward.pt", no_forward), opts);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("no forward"), std::string::npos)
      << missing.error().message;

  ASSERT_TRUE(write_file_atomic(dir / "junk.pt", std::string_view("not a zip")).ok());
  auto junk = Trainer::create(
      script_task("junk.pt", hex_encode(sha256(std::string_view("not a zip")))), opts);
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.error().message.find("not a TorchScript module"), std::string::npos);
}

// A real archive whose code/*.py was edited into TorchScript that does not compile: loading it
// throws torch::jit::ErrorReport (no c10::Error), still the requestor's bad input (exit 2).
TEST(TorchScript, AnArchiveWhoseCodeDoesNotCompileIsInvalidInput) {
  testing::ScratchDir dir;
  write_module(dir / "model.pt", true);
  const std::string edit =
      "import sys, zipfile\n"
      "src, dst = zipfile.ZipFile(sys.argv[1]), zipfile.ZipFile(sys.argv[2], 'w', "
      "zipfile.ZIP_STORED)\n"
      "edited = 0\n"
      "for info in src.infolist():\n"
      "    data = src.read(info.filename)\n"
      "    if '/code/' in info.filename and info.filename.endswith('.py') and b'return' in data:\n"
      "        data = data.replace(b'return', b'return no_such_name(x) +', 1)\n"
      "        edited += 1\n"
      "    dst.writestr(info.filename, data)\n"
      "dst.close()\n"
      "sys.exit(0 if edited else 3)\n";
  ASSERT_TRUE(write_file_atomic(dir / "edit.py", std::string_view(edit)).ok());
  auto r =
      testing::run_command("/usr/bin/python3 " + (dir / "edit.py").string() + " " +
                               (dir / "model.pt").string() + " " + (dir / "broken.pt").string(),
                           dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TrainerOptions opts;
  opts.task_dir = dir.path();
  auto broken = Trainer::create(
      script_task("broken.pt", hex_encode(sha256(*read_file(dir / "broken.pt")))), opts);
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().code, Errc::kInvalidInput) << broken.error().message;
  EXPECT_NE(broken.error().message.find("broken.pt: not a TorchScript module ("), std::string::npos)
      << broken.error().message;
  EXPECT_NE(broken.error().message.find("no_such_name"), std::string::npos)
      << broken.error().message;
}

}  // namespace
}  // namespace vt::training

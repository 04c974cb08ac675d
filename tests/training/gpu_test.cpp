// CUDA replays land on the same bits, and a snapshot written on the GPU machine loads
// with Python's safetensors. Labelled `gpu`: every test skips without CUDA, so CI (CPU only)
// passes them as skipped; scripts/gpu-build.sh runs them on the CUDA machine.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/file_io.h"
#include "tests/test_util.h"
#include "training/runtime.h"
#include "training/trainer.h"
#include "training/zoo/zoo.h"

namespace vt::training {
namespace {

#define VT_SKIP_WITHOUT_CUDA()                                                                   \
  do {                                                                                           \
    const RuntimeInfo info = runtime_info();                                                     \
    if (!info.cuda_available) GTEST_SKIP() << "no CUDA (LibTorch " << info.torch_version << ")"; \
  } while (0)

// Small, but with every piece a CUDA replay has to restore: BatchNorm buffers, AdamW moments,
// and (gpt) dropout, which draws from the CUDA generator.
Task cuda_task(const std::string& model) {
  Task task = *default_task(model, "synthetic");
  task.device = Device::kCuda;
  task.epochs = 2;
  task.steps_per_epoch = 4;
  task.batch_size = 8;
  task.dataset.options = {{"samples", 32}};
  task.optimizer = {.name = "adamw", .lr = 1e-3, .weight_decay = 0.01};
  if (model == "cnn") {
    task.model.options = {{"width", 8}, {"blocks", 1}, {"classes", 10}};
  } else {
    task.model.options = {
        {"vocab", 64},    {"d_model", 32},          {"layers", 2}, {"heads", 4}, {"seq_len", 16},
        {"mlp_ratio", 4}, {"dropout_permille", 100}};
  }
  return task;
}

class CudaReplay : public ::testing::TestWithParam<std::string> {};

// Two epochs on the GPU; epoch 2 replayed from the epoch-1 snapshot by replay_tool in a fresh
// process (nothing shared with this one) lands on the same canonical bytes.
TEST_P(CudaReplay, EpochTwoReplaysBitIdenticallyInAFreshProcess) {
  VT_SKIP_WITHOUT_CUDA();
  const Task task = cuda_task(GetParam());
  std::vector<Bytes> snapshots;
  {
    auto trainer = Trainer::create(task);
    ASSERT_TRUE(trainer.ok()) << trainer.error().message;
    EXPECT_EQ((*trainer)->device().rfind("cuda", 0), 0u) << (*trainer)->device();
    snapshots.push_back(*(*trainer)->snapshot());
    for (int e = 1; e <= 2; ++e) {
      auto summary = (*trainer)->train_epoch();
      ASSERT_TRUE(summary.ok()) << summary.error().message;
      snapshots.push_back(*(*trainer)->snapshot());
    }
  }
  ASSERT_NE(snapshots[1], snapshots[2]) << "training did not change the state";

  testing::ScratchDir dir;
  ASSERT_TRUE(write_file_atomic(dir / "task.json", pretty_task_json(task)).ok());
  ASSERT_TRUE(write_file_atomic(dir / "epoch1.safetensors", snapshots[1]).ok());
  auto r = testing::run_command(std::string(VT_REPLAY_TOOL) + " " + (dir / "task.json").string() +
                                    " " + (dir / "epoch1.safetensors").string() + " " +
                                    (dir / "replay2.safetensors").string(),
                                dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto replayed = read_file(dir / "replay2.safetensors");
  ASSERT_TRUE(replayed.ok()) << replayed.error().message;
  EXPECT_TRUE(*replayed == snapshots[2]) << "the CUDA replay of epoch 2 differs from the original";
}

INSTANTIATE_TEST_SUITE_P(Zoo, CudaReplay, ::testing::Values("cnn", "gpt"), testing::ValueName());

// The Python that holds the GPU stack: the torch venv when it is there.
std::string python() {
  if (const char* p = std::getenv("VT_PYTHON")) return p;
  if (std::filesystem::exists("/opt/torch/.venv/bin/python3"))
    return "/opt/torch/.venv/bin/python3";
  return "python3";
}

// A snapshot written on the GPU machine is an ordinary safetensors file: Python's reader sees
// every tensor, our metadata, and the same bits that gather() reads on the device.
TEST(CudaSnapshot, LoadsWithPythonSafetensors) {
  VT_SKIP_WITHOUT_CUDA();
  testing::ScratchDir dir;
  const std::string py = python();
  if (testing::run_command(py + " -c 'import safetensors, numpy'", dir.path()).exit_code != 0) {
    GTEST_SKIP() << py << " has no safetensors (or numpy)";
  }
  const Task task = cuda_task("gpt");
  auto trainer = Trainer::create(task);
  ASSERT_TRUE(trainer.ok()) << trainer.error().message;
  ASSERT_TRUE((*trainer)->train_epoch().ok());
  auto bytes = (*trainer)->snapshot();
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  ASSERT_TRUE(write_file_atomic(dir / "snap.safetensors", *bytes).ok());
  const std::uint64_t index[] = {5};
  auto value = (*trainer)->gather("param/tok.weight", index);
  ASSERT_TRUE(value.ok()) << value.error().message;

  const std::string script =
      "import sys\n"
      "from safetensors import safe_open\n"
      "with safe_open(sys.argv[1], framework='numpy') as f:\n"
      "    meta = f.metadata()\n"
      "    v = f.get_tensor('param/tok.weight').reshape(-1)[5]\n"
      "    print(len(list(f.keys())), meta['format'], meta['device'], v.tobytes().hex())\n";
  ASSERT_TRUE(write_file_atomic(dir / "load.py", script).ok());
  auto r = testing::run_command(
      py + " " + (dir / "load.py").string() + " " + (dir / "snap.safetensors").string(),
      dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string expected = std::to_string((*trainer)->layout().size()) + " " + kSnapshotFormat +
                               " cuda " + hex_encode(*value) + "\n";
  EXPECT_EQ(r.out, expected);
}

}  // namespace
}  // namespace vt::training

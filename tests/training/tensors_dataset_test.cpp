// The `tensors` dataset (docs/datasets.md) on real data: sklearn's digits written by
// scripts/make_digits.py, trained by the mlp, replayed bit for bit from a snapshot, sharded
// without changing a bit; and every bad input named with exit code 2.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "common/safetensors.h"
#include "common/sha256.h"
#include "tests/test_util.h"
#include "training/trainer.h"
#include "training/zoo/zoo.h"

namespace vt::training {
namespace {

namespace fs = std::filesystem;

// Digits files in `dir`; returns the pins make_digits.py prints.
std::map<std::string, std::string> make_digits(const fs::path& dir, const std::string& extra = "") {
  auto r = testing::run_command(
      "/usr/bin/python3 " VT_SOURCE_DIR "/scripts/make_digits.py " + dir.string() + " " + extra,
      dir.parent_path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::string> pins;
  const nlohmann::json printed = nlohmann::json::parse(r.out);  // items() refers into it
  for (const auto& item : printed.items()) pins[item.key()] = item.value().get<std::string>();
  return pins;
}

Task digits_task(const std::map<std::string, std::string>& pins) {
  Task t = *default_task("mlp", "tensors");
  t.model.options = {{"input_dim", 64}, {"hidden", 64}, {"layers", 1}, {"classes", 10}};
  t.dataset.path = "digits";
  for (const auto& [name, digest] : pins) {
    (name == "digits-eval.safetensors" ? t.dataset.eval_files : t.dataset.files)[name] = digest;
  }
  t.optimizer = {.name = "sgd", .lr = 0.1, .momentum = 0.9};
  t.batch_size = 32;
  t.epochs = 4;
  t.seed = 7;
  return t;
}

TEST(TensorsDataset, MlpLearnsDigitsAndReplaysBitForBit) {
  testing::ScratchDir dir;
  const Task task = digits_task(make_digits(dir / "digits"));
  ASSERT_TRUE(validate_task(task).ok());
  TrainerOptions opt;
  opt.task_dir = dir.path();
  auto trainer = Trainer::create(task, opt);
  ASSERT_TRUE(trainer.ok()) << trainer.error().message;
  EXPECT_EQ((*trainer)->dataset_size(), 1797 - 359);
  std::vector<Bytes> snapshots{*(*trainer)->snapshot()};
  std::vector<EvalMetrics> evals;
  for (int e = 0; e < task.epochs; ++e) {
    auto s = (*trainer)->train_epoch();
    ASSERT_TRUE(s.ok()) << s.error().message;
    ASSERT_TRUE(s->eval.has_value());
    EXPECT_EQ(s->eval->examples, 359);
    evals.push_back(*s->eval);
    snapshots.push_back(*(*trainer)->snapshot());
  }
  EXPECT_GE(evals.back().accuracy, 0.90) << "held-out accuracy after " << task.epochs << " epochs";
  EXPECT_LT(evals.back().loss, evals.front().loss);

  // Epoch 3 again from the committed state of epoch 2: the same bytes and the same eval bits.
  auto replay = Trainer::restore(task, snapshots[2], opt);
  ASSERT_TRUE(replay.ok()) << replay.error().message;
  auto s = (*replay)->train_epoch();
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(*(*replay)->snapshot(), snapshots[3]);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(s->eval->loss),
            std::bit_cast<std::uint64_t>(evals[2].loss));
  EXPECT_EQ(s->eval->accuracy, evals[2].accuracy);
}

TEST(TensorsDataset, ShardsConcatenateInNameOrder) {
  testing::ScratchDir dir;
  Task one = digits_task(make_digits(dir / "digits"));
  Task two = digits_task(make_digits(dir / "digits2", "--shards 3"));
  two.dataset.path = "digits2";
  ASSERT_EQ(two.dataset.files.size(), 3u);
  one.epochs = two.epochs = 1;
  TrainerOptions opt;
  opt.task_dir = dir.path();
  auto a = Trainer::create(one, opt);
  auto b = Trainer::create(two, opt);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->train_epoch().ok());
  ASSERT_TRUE((*b)->train_epoch().ok());
  // Different tasks (their ids differ), the same training: compare parameters, not metadata.
  auto params = [](const Bytes& snap) {
    auto v = parse_safetensors(snap);
    std::vector<Bytes> out;
    for (const auto& t : v->tensors) {
      if (t.name.rfind("param/", 0) == 0) out.emplace_back(v->data(t).begin(), v->data(t).end());
    }
    return out;
  };
  EXPECT_EQ(params(*(*a)->snapshot()), params(*(*b)->snapshot()));
}

TEST(TensorsDataset, EvalFractionHoldsOutPrngChosenRows) {
  testing::ScratchDir dir;
  Task task = digits_task(make_digits(dir / "digits"));
  task.dataset.eval_files.clear();
  task.dataset.eval_fraction = 0.25;
  task.epochs = 1;
  TrainerOptions opt;
  opt.task_dir = dir.path();
  auto t = Trainer::create(task, opt);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ((*t)->dataset_size(), 1438 - 359);
  auto s = (*t)->train_epoch();
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->eval->examples, 359);
  task.seed += 1;  // another seed holds out other rows
  auto u = Trainer::create(task, opt);
  auto s2 = (*u)->train_epoch();
  EXPECT_NE(s2->eval->loss, s->eval->loss);
}

// A hand-built shard for the error cases: real errors need precise bad bytes.
std::string write_shard(const fs::path& file, DType in, std::vector<std::int64_t> in_shape,
                        DType tg, std::vector<std::int64_t> tg_shape) {
  auto bytes_of = [](DType d, const std::vector<std::int64_t>& s) {
    std::uint64_t n = dtype_size(d);
    for (auto x : s) n *= static_cast<std::uint64_t>(x);
    return Bytes(n, 0);
  };
  Bytes a = bytes_of(in, in_shape), b = bytes_of(tg, tg_shape);
  auto out = write_canonical({{{"inputs", in, in_shape}, a}, {{"targets", tg, tg_shape}, b}}, {});
  EXPECT_TRUE(out.ok());
  EXPECT_TRUE(write_file_atomic(file, *out).ok());
  return hex_encode(sha256(*out));
}

// An mlp over 6 features and 3 classes whose data files lie beside the task (pins added by the
// test).
Task tiny_mlp_task() {
  Task task = *default_task("mlp", "tensors");
  task.model.options = {{"input_dim", 6}, {"hidden", 4}, {"layers", 1}, {"classes", 3}};
  task.dataset.path = ".";
  task.batch_size = 2;
  return task;
}

Error create_error(const Task& task, const fs::path& dir) {
  TrainerOptions opt;
  opt.task_dir = dir;
  auto t = Trainer::create(task, opt);
  EXPECT_FALSE(t.ok());
  return t.ok() ? Error{} : t.error();
}

TEST(TensorsDataset, BadInputsAreNamedAndInvalidInput) {
  testing::ScratchDir dir;
  Task task = tiny_mlp_task();
  auto expect = [&](const std::string& needle) {
    Error e = create_error(task, dir.path());
    EXPECT_EQ(e.code, Errc::kInvalidInput) << e.message;
    EXPECT_NE(e.message.find(needle), std::string::npos)
        << "want \"" << needle << "\" in: " << e.message;
  };
  task.dataset.files = {
      {"a.safetensors", write_shard(dir / "a.safetensors", DType::kF32, {4, 6}, DType::kI64, {4})},
      {"b.safetensors", std::string(64, 'a')}};
  expect("file \"b.safetensors\" is missing");
  write_shard(dir / "b.safetensors", DType::kF32, {4, 6}, DType::kI64, {4});
  expect("b.safetensors: SHA-256 is");
  task.dataset.files["b.safetensors"] =
      write_shard(dir / "b.safetensors", DType::kF32, {4, 6}, DType::kI64, {5});
  expect("b.safetensors: inputs hold 4 examples, targets 5");
  task.dataset.files["b.safetensors"] =
      write_shard(dir / "b.safetensors", DType::kU8, {4, 6}, DType::kI64, {4});
  expect("b.safetensors: shard holds inputs U8[6]");
  task.dataset.files["b.safetensors"] =
      write_shard(dir / "b.safetensors", DType::kF32, {4, 6}, DType::kI64, {4});
  TrainerOptions opt;
  opt.task_dir = dir.path();
  ASSERT_TRUE(Trainer::create(task, opt).ok());
  task.model.options["input_dim"] = 7;
  expect("mlp expects 7 input features (model.options.input_dim)");
  task.model.options["input_dim"] = 6;
  task.dataset.files = {
      {"a.safetensors", write_shard(dir / "a.safetensors", DType::kF32, {4, 6}, DType::kF32, {4})}};
  expect("loss cross_entropy needs I64 class-id targets, got F32");
}

// gpt token ids stored as I32 or I8 reach the Embedding as I64 like I64 ones: a value outside
// the vocabulary is the requestor's bad input, named with its file, example and value, never an
// index error inside LibTorch. Tokens are the bytes of real text (ASCII, so < 128 fits I8).
TEST(TensorsDataset, GptTokenIdsOfEveryIntegerDtypeAreCheckedAgainstTheVocabulary) {
  auto text = read_file("/usr/share/games/fortunes/debian");
  if (!text.ok()) GTEST_SKIP() << "Debian's fortunes package is not installed (scripts/setup.sh)";
  testing::ScratchDir dir;
  constexpr std::int64_t kRows = 8, kT = 16;
  Task task = *default_task("gpt", "tensors");
  task.model.options = {
      {"vocab", 128}, {"d_model", 16}, {"layers", 1}, {"heads", 2}, {"seq_len", kT}};
  task.dataset.path = ".";
  task.batch_size = kRows;
  task.steps_per_epoch = 1;  // one batch: every row
  struct Case {
    DType dtype;
    std::int64_t bad;
  };
  for (const Case& c : {Case{DType::kI32, 70000}, Case{DType::kI8, -1}, Case{DType::kI16, 128}}) {
    const std::size_t width = dtype_size(c.dtype);
    Bytes in(kRows * kT * width, 0), tg(kRows * kT * 8, 0);
    for (std::int64_t i = 0; i < kRows * kT; ++i) {
      const std::uint8_t tok = (*text)[static_cast<std::size_t>(i)] & 0x7f;
      in[static_cast<std::size_t>(i) * width] = tok;
      tg[static_cast<std::size_t>(i) * 8] = (*text)[static_cast<std::size_t>(i) + 1] & 0x7f;
    }
    auto write = [&](const Bytes& inputs) {
      auto out = write_canonical(
          {{{"inputs", c.dtype, {kRows, kT}}, inputs}, {{"targets", DType::kI64, {kRows, kT}}, tg}},
          {});
      EXPECT_TRUE(out.ok());
      EXPECT_TRUE(write_file_atomic(dir / "tok.safetensors", *out).ok());
      task.dataset.files = {{"tok.safetensors", hex_encode(sha256(*out))}};
    };
    TrainerOptions opt;
    opt.task_dir = dir.path();
    write(in);
    auto good = Trainer::create(task, opt);
    ASSERT_TRUE(good.ok()) << good.error().message;
    auto ok = (*good)->train_epoch();
    ASSERT_TRUE(ok.ok()) << ok.error().message;

    // Example 5, position 3: little-endian, sign-extended by the dtype's width.
    const std::size_t at = static_cast<std::size_t>(5 * kT + 3) * width;
    for (std::size_t b = 0; b < width; ++b)
      in[at + b] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(c.bad) >> (8 * b));
    write(in);
    auto bad = Trainer::create(task, opt);
    ASSERT_TRUE(bad.ok()) << bad.error().message;
    auto e = (*bad)->train_epoch();
    ASSERT_FALSE(e.ok()) << dtype_name(c.dtype);
    EXPECT_EQ(e.error().code, Errc::kInvalidInput) << e.error().message;
    const std::string want = "tok.safetensors: inputs of example 5 hold token " +
                             std::to_string(c.bad) + ", outside the model's vocabulary of 128";
    EXPECT_NE(e.error().message.find(want), std::string::npos) << e.error().message;
  }
}

}  // namespace
}  // namespace vt::training

namespace vt::training {
namespace {

// TorchScript modules get inputs in their stored dtype: token ids (I64) reach an Embedding,
// U8 pixels arrive as bytes (the module asserts it). Modules exported by Python's torch.
constexpr const char* kModules = R"PY(
import sys, torch
class Tokens(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(256, 16)
        self.drop = torch.nn.Dropout(0.1)
        self.out = torch.nn.Linear(16, 256)
    def forward(self, x):
        assert x.dtype == torch.int64
        return self.out(self.drop(self.emb(x)))
class Pixels(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(64, 10)
    def forward(self, x):
        assert x.dtype == torch.uint8
        return self.fc(x.float() / 16.0)
torch.jit.script(Tokens()).save(sys.argv[1] + "/tokens.pt")
torch.jit.script(Pixels()).save(sys.argv[1] + "/pixels.pt")
)PY";

// Every trainer hashes its pinned files when it opens them (a verify builds one per process, so
// nothing is remembered between builds): bytes rewritten in place, with the same size and inode
// and their modification time put back (`touch -d`), are refused by the next build.
TEST(TensorsDataset, AShardRewrittenInPlaceIsHashedAgain) {
  testing::ScratchDir dir;
  Task task = tiny_mlp_task();
  const fs::path shard = dir / "a.safetensors";
  task.dataset.files = {
      {"a.safetensors", write_shard(shard, DType::kF32, {4, 6}, DType::kI64, {4})}};
  struct stat written {};
  ASSERT_EQ(::stat(shard.c_str(), &written), 0);
  TrainerOptions opt;
  opt.task_dir = dir.path();
  ASSERT_TRUE(Trainer::create(task, opt).ok());
  Bytes bytes = *read_file(shard);
  bytes.back() ^= 0x01;  // one target bit, same size, same inode
  {
    std::FILE* f = std::fopen(shard.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
  }
  const timespec times[2] = {written.st_atim, written.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, shard.c_str(), times, 0), 0);
  Error e = create_error(task, dir.path());
  EXPECT_NE(e.message.find("a.safetensors: SHA-256 is"), std::string::npos) << e.message;
}

TEST(TensorsDataset, TorchScriptGetsInputsInTheirStoredDtype) {
  testing::ScratchDir dir;
  ASSERT_TRUE(write_file_atomic(dir / "modules.py", as_bytes(kModules)).ok());
  auto py = testing::run_command(
      "/usr/bin/python3 " + (dir / "modules.py").string() + " " + dir.path().string(), dir.path());
  ASSERT_EQ(py.exit_code, 0) << py.err;
  TrainerOptions opt;
  opt.task_dir = dir.path();
  auto pin = [&](const char* name) { return hex_encode(sha256(*read_file(dir / name))); };

  // Byte-level tokens of real text.
  auto text = read_file("/usr/share/games/fortunes/debian");
  if (!text.ok()) GTEST_SKIP() << "Debian's fortunes package is not installed (scripts/setup.sh)";
  Bytes u16;
  for (std::uint8_t b : *text) u16.insert(u16.end(), {b, 0});
  ASSERT_TRUE(write_file_atomic(dir / "text.bin", u16).ok());
  Task tokens = *default_task("torchscript", "tokens");
  tokens.model.path = "tokens.pt";
  tokens.model.sha256 = pin("tokens.pt");
  tokens.dataset.options = {{"context", 16}};
  tokens.dataset.path = ".";
  tokens.dataset.files = {{"text.bin", pin("text.bin")}};
  tokens.steps_per_epoch = 5;
  tokens.batch_size = 8;
  auto t = Trainer::create(tokens, opt);
  ASSERT_TRUE(t.ok()) << t.error().message;
  auto s = (*t)->train_epoch();
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(std::isfinite(s->mean_loss));

  auto r = testing::run_command("/usr/bin/python3 " VT_SOURCE_DIR "/scripts/make_digits.py " +
                                    (dir / "u8").string() + " --dtype u8",
                                dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::filesystem::rename(dir / "pixels.pt", dir / "u8" / "pixels.pt");
  Task pixels = *default_task("torchscript", "tensors");
  pixels.model.path = "u8/pixels.pt";
  pixels.model.sha256 = pin("u8/pixels.pt");
  pixels.dataset.path = "u8";
  pixels.dataset.files = {{"digits-train.safetensors", pin("u8/digits-train.safetensors")}};
  pixels.dataset.eval_files = {{"digits-eval.safetensors", pin("u8/digits-eval.safetensors")}};
  pixels.steps_per_epoch = 5;
  auto p = Trainer::create(pixels, opt);
  ASSERT_TRUE(p.ok()) << p.error().message;
  auto ps = (*p)->train_epoch();
  ASSERT_TRUE(ps.ok()) << ps.error().message;
  ASSERT_TRUE(ps->eval.has_value());
  EXPECT_GT(ps->eval->accuracy, 0.0);
}

}  // namespace
}  // namespace vt::training

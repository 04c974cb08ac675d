// The gpt on the fortunes text (Debian's `fortunes`, megabytes of real
// English) as a byte-level u16 `tokens` file. A small gpt trained by `veritrain train` ends with
// a held-out loss below the unigram entropy of the text, which it can only reach by learning
// which byte follows which; `veritrain verify` replays every epoch and accepts, the held-out
// metrics verified bit for bit. A window longer than a file is exit 2 naming the file.

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "common/sha256.h"
#include "tests/test_util.h"

namespace vt {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::veritrain_binary;

const fs::path kFortunes = "/usr/share/games/fortunes";

// Bytes of the fortune files named, as little-endian u16 tokens.
Bytes u16_tokens(const std::vector<std::string>& names) {
  Bytes out;
  for (const auto& n : names) {
    auto text = read_file(kFortunes / n);
    EXPECT_TRUE(text.ok()) << n;
    if (!text.ok()) continue;
    for (std::uint8_t b : *text) {
      out.push_back(b);
      out.push_back(0);
    }
  }
  return out;
}

// Entropy in nats of the byte distribution: the loss of the best model that ignores context.
double unigram_entropy(const Bytes& u16) {
  std::vector<double> count(256, 0.0);
  for (std::size_t i = 0; i < u16.size(); i += 2) count[u16[i]] += 1;
  const double n = static_cast<double>(u16.size() / 2);
  double h = 0;
  for (double c : count) {
    if (c > 0) h -= c / n * std::log(c / n);
  }
  return h;
}

struct Fortunes {
  testing::ScratchDir dir;
  Bytes train = u16_tokens({"computers", "cookie", "definitions", "drugs"});
  Bytes eval = u16_tokens({"education"});
  nlohmann::json task;
  Fortunes() {
    EXPECT_TRUE(write_file_atomic(dir / "train.bin", train).ok());
    EXPECT_TRUE(write_file_atomic(dir / "eval.bin", eval).ok());
    task = {
        {"model",
         {{"name", "gpt"},
          {"options",
           {{"vocab", 256}, {"d_model", 32}, {"heads", 4}, {"layers", 1}, {"seq_len", 32}}}}},
        {"dataset",
         {{"name", "tokens"},
          {"path", "."},
          {"files", {{"train.bin", hex_encode(sha256(train))}}},
          {"eval_files", {{"eval.bin", hex_encode(sha256(eval))}}}}},
        {"optimizer", {{"name", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.01}, {"beta2", 0.95}}},
        {"epochs", 2},
        {"steps_per_epoch", 40},
        {"batch_size", 32},
        {"seed", 5}};
  }
  std::string write_task(const std::string& name) const {
    std::ofstream(dir / name) << task.dump(2);
    return (dir / name).string();
  }
};

TEST(TokensDataset, GptOnFortunesBeatsTheUnigramEntropyAndVerifies) {
  if (!fs::exists(kFortunes / "cookie"))
    GTEST_SKIP() << "Debian's fortunes package is not installed (scripts/setup.sh)";
  Fortunes f;
  const double entropy = unigram_entropy(f.eval);
  ASSERT_GT(entropy, 2.0);  // real English text, not a degenerate file
  const std::string task = f.write_task("task.json");
  auto train = run_command(
      veritrain_binary() + " --json train --task " + task + " --workdir " + (f.dir / "wd").string(),
      f.dir.path());
  ASSERT_EQ(train.exit_code, 0) << train.err;
  auto v = run_command(veritrain_binary() + " --json verify --task " + task + " --workdir " +
                           (f.dir / "wd").string() +
                           " --check-probability 1 --seed 01 --jobs 1 --report " +
                           (f.dir / "report").string(),
                       f.dir.path());
  ASSERT_EQ(v.exit_code, 0) << v.out << v.err;
  auto verdict = nlohmann::json::parse(v.out);
  ASSERT_EQ(verdict["checks"].size(), 2u);
  for (const auto& c : verdict["checks"])
    EXPECT_EQ(c["metrics"]["eval"]["status"], "verified") << c.dump();
  const auto& last = verdict["checks"][1]["metrics"]["eval"]["claimed"];
  EXPECT_EQ(last["examples"].get<std::int64_t>(),
            static_cast<std::int64_t>(f.eval.size() / 2 / 33));  // disjoint windows
  EXPECT_LT(last["loss"].get<double>(), entropy)
      << "held-out loss vs unigram entropy " << entropy << " nats";
}

TEST(TokensDataset, AWindowLongerThanTheFileIsExitTwo) {
  Fortunes f;
  Bytes tiny(2 * 20, 'a');
  ASSERT_TRUE(write_file_atomic(f.dir / "tiny.bin", tiny).ok());
  f.task["dataset"]["files"] = {{"tiny.bin", hex_encode(sha256(tiny))}};
  f.task["dataset"].erase("eval_files");
  const std::string task = f.write_task("tiny.json");
  auto r = run_command(
      veritrain_binary() + " train --task " + task + " --workdir " + (f.dir / "wd").string(),
      f.dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tiny.bin: holds 20 tokens, shorter than one window of context + 1 = 33"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(f.dir / "wd" / "commitments.log"));  // nothing committed
}

TEST(TokensDataset, TaskInitPinsDataFilesAndSetsTheTokenOptions) {
  Fortunes f;
  fs::create_directories(f.dir / "data");
  ASSERT_TRUE(write_file_atomic(f.dir / "data" / "train.bin", f.train).ok());
  ASSERT_TRUE(write_file_atomic(f.dir / "data" / "eval.bin", f.eval).ok());
  const std::string out = (f.dir / "init.json").string();
  auto init = run_command("cd " + f.dir.path().string() + " && " + veritrain_binary() +
                              " task init --model gpt --dataset tokens --option vocab=256 "
                              "--context 16 --token-dtype u16"
                              " --data-file data/train.bin --eval-file data/eval.bin --out " +
                              out,
                          f.dir.path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  auto task = nlohmann::json::parse(*read_text_file(out));
  EXPECT_EQ(task["dataset"]["path"], "data");
  EXPECT_EQ(task["dataset"]["files"]["train.bin"], hex_encode(sha256(f.train)));
  EXPECT_EQ(task["dataset"]["eval_files"]["eval.bin"], hex_encode(sha256(f.eval)));
  EXPECT_EQ(task["dataset"]["options"]["context"], 16);
  EXPECT_EQ(task["dataset"]["options"]["token_bits"], 16);

  auto bad = run_command(
      "cd " + f.dir.path().string() + " && " + veritrain_binary() +
          " task init --model gpt --dataset tokens --token-dtype u8 --data-file data/train.bin",
      f.dir.path());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--token-dtype: expected u16 or u32, got \"u8\""), std::string::npos)
      << bad.err;
}

}  // namespace
}  // namespace vt

// docs/datasets.md is complete for `tensors` data when reference/replay_ref.py (its reader,
// replay_ref_data.py, written from that page) replays veritrain's epochs on a requestor's own
// files bit for bit: real handwritten digits (sklearn, scripts/make_digits.py) as one F32 file,
// as three U8 shards and as [3, 8, 8] images for the cnn, with and without an eval_fraction
// hold-out.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/file_io.h"
#include "common/json.h"
#include "tests/cli/reference_util.h"
#include "tests/test_util.h"

namespace vt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using reference::committed_roots;
using reference::Compared;
using reference::kPython;
using reference::script;

bool have_reference() { return testing::have_python_modules("torch, numpy, sklearn"); }

// One task on digits written into `work`/data by make_digits.py with `digits_args`; the task
// file sits beside the data folder, as docs/datasets.md asks.
struct Case {
  std::string name, digits_args, init_args, model = kMlp;
  static inline const std::string kMlp =
      " --model mlp --option input_dim=64 --option classes=10 --option hidden=16 --option layers=1 "
      "--k 16";
  static inline const std::string kCnn =
      " --model cnn --option width=4 --option blocks=1 --option classes=10 --k 128";
};

// The digits' training files, in the order make_digits.py names them.
std::string data_files(const std::string& digits_args) {
  if (digits_args.find("--shards 3") == std::string::npos)
    return " --data-file data/digits-train.safetensors";
  std::string out;
  for (int i = 0; i < 3; ++i)
    out += " --data-file data/digits-train-" + std::to_string(i) + ".safetensors";
  return out;
}

// Trains each case for 2 epochs, then replays epochs 1 and 2 (and the initial state of the
// first case) with `replayer` in one interpreter, and returns each root beside veritrain's.
std::vector<Compared> replay_cases(const std::vector<Case>& cases, const std::string& replayer,
                                   const testing::ScratchDir& dir) {
  std::string jobs, outputs;
  std::vector<Compared> out;
  for (const Case& c : cases) {
    const fs::path work = dir / c.name;
    fs::create_directories(work);
    auto made = testing::run_command(kPython + " " + std::string(VT_SOURCE_DIR) +
                                         "/scripts/make_digits.py" + " " +
                                         (work / "data").string() + " " + c.digits_args,
                                     dir.path());
    EXPECT_EQ(made.exit_code, 0) << made.err;
    auto init = testing::run_command(
        "cd " + work.string() + " && " + testing::veritrain_binary() +
            " task init --determinism exact --dataset tensors --epochs 2 --seed 5" + c.model +
            data_files(c.digits_args) + " " + c.init_args + " --out task.json",
        dir.path());
    EXPECT_EQ(init.exit_code, 0) << c.name << ": " << init.err;
    const fs::path task = work / "task.json";
    json t = json::parse(*read_text_file(task));
    t["fingerprint"]["tracking_k"] =
        t["fingerprint"]["k"];  // fewer sampled values: the test is about the training
    EXPECT_TRUE(write_file_atomic(task, t.dump()).ok());
    auto train = testing::run_command(testing::veritrain_binary() + " train --task " +
                                          task.string() + " --workdir " + (work / "w").string(),
                                      dir.path());
    EXPECT_EQ(train.exit_code, 0) << c.name << ": " << train.err;
    const auto roots = committed_roots(work / "w/commitments.log");
    EXPECT_EQ(roots.size(), 3u) << c.name;
    if (roots.size() != 3) continue;
    for (int e : {0, 1}) {
      const std::string before = (work / "e").string() + std::to_string(e);
      const std::string after = (work / "ref").string() + std::to_string(e + 1);
      auto exported =
          testing::run_command(testing::veritrain_binary() + " inspect " + (work / "w").string() +
                                   " --epoch " + std::to_string(e) + " --out " + before,
                               dir.path());
      EXPECT_EQ(exported.exit_code, 0) << exported.err;
      jobs.append(" ").append(task.string()).append(" ").append(before).append(" ").append(after);
      outputs += " " + after;
      out.push_back({c.name + " epoch " + std::to_string(e + 1), "", roots[e + 1]});
    }
    if (&c == &cases.front()) {
      const std::string init0 = (work / "ref0").string();
      jobs.append(" --init ")
          .append(task.string())
          .append(" ")
          .append((work / "e0").string())
          .append(" ")
          .append(init0);
      outputs += " " + init0;
      out.push_back({c.name + " initial state", "", roots[0]});
    }
  }
  auto r = testing::run_command(kPython + " " + replayer + jobs, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto fp = testing::run_command(kPython + " " + script("fingerprint_ref.py") + " --root" + outputs,
                                 dir.path());
  EXPECT_EQ(fp.exit_code, 0) << fp.err;
  std::istringstream lines(fp.out);
  std::string line;
  for (Compared& c : out) {
    if (std::getline(lines, line)) c.reference = line;
  }
  return out;
}

TEST(ReferenceReplayTensors, DigitsMlpAndCnnShardsU8HeldOutBitIdentical) {
  if (!have_reference())
    GTEST_SKIP() << "python3-torch / numpy / sklearn not installed (scripts/setup.sh)";
  testing::ScratchDir dir;
  const std::vector<Case> cases = {
      // a full pass of 44 steps per epoch; the eval file changes no training state
      {"f32-sgd-nesterov-cosine", "--dtype f32",
       "--eval-file data/digits-eval.safetensors --batch-size 32 --optimizer sgd --momentum 0.9 "
       "--nesterov "
       "--weight-decay 1e-4 --lr 0.05 --schedule cosine --warmup-steps 10 --min-lr 1e-4"},
      {"f32-adam-step-groups", "--dtype f32",
       "--batch-size 16 --steps-per-epoch 12 --gradient-groups 4 --optimizer adam --lr 3e-3 "
       "--weight-decay 1e-4 "
       "--schedule step --step-size 1 --gamma 0.5"},
      // the cnn on [3, 8, 8] digits, BatchNorm buffers averaged over 2 groups
      {"image-cnn-adamw-groups", "--image",
       "--batch-size 16 --steps-per-epoch 4 --gradient-groups 2 --optimizer adamw --lr 1e-3 "
       "--weight-decay 0.01",
       Case::kCnn},
      // three U8 shards (raw 0..16 pixels), 30 % of the rows held out by the PRNG
      {"u8-shards-sgd-held-out", "--dtype u8 --shards 3",
       "--eval-fraction 0.3 --batch-size 64 --steps-per-epoch 30 --optimizer sgd --momentum 0.9 "
       "--lr 0.01"},
  };
  const auto results = replay_cases(cases, script("replay_ref.py"), dir);
  ASSERT_EQ(results.size(), 2 * cases.size() + 1);
  for (const Compared& c : results) EXPECT_EQ(c.reference, c.committed) << c.what;
}

// The comparison can fail on the data: a copy of the reference whose reader concatenates the
// shards in reverse name order (docs/datasets.md: file-name order) reads other rows for the same
// indices, so every trained root differs, while the initial state, which reads no data, agrees.
// A copy of the reference that ignores eval_fraction trains on rows veritrain never saw.
TEST(ReferenceReplayTensors, ShardOrderOrHeldOutRowsChangedInACopyOfTheReferenceDisagrees) {
  if (!have_reference())
    GTEST_SKIP() << "python3-torch / numpy / sklearn not installed (scripts/setup.sh)";
  testing::ScratchDir dir;
  const fs::path copy = dir / "changed";
  fs::create_directories(copy);
  auto change = [&](const std::string& file, const std::string& from, const std::string& to) {
    std::string text = *read_text_file(script(file));
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << file << ": " << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    EXPECT_TRUE(write_file_atomic(copy / file, text).ok());
  };
  change("replay_ref_data.py", "sorted(files, key=lambda s: s.encode())",
         "sorted(files, key=lambda s: s.encode(), reverse=True)");
  fs::copy_file(script("replay_ref.py"),
                copy / "replay_ref.py");  // it imports its siblings, the changed reader
  fs::copy_file(script("ref_common.py"), copy / "ref_common.py");
  fs::copy_file(script("veritrain_zoo.py"), copy / "veritrain_zoo.py");
  const std::vector<Case> reversed = {
      {"u8-shards", "--dtype u8 --shards 3", "--batch-size 32 --steps-per-epoch 8"}};
  const auto results = replay_cases(reversed, (copy / "replay_ref.py").string(), dir);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_NE(results[0].reference, results[0].committed) << results[0].what;
  EXPECT_NE(results[1].reference, results[1].committed) << results[1].what;
  EXPECT_EQ(results[2].reference, results[2].committed) << "the initial state reads no data";

  change("replay_ref.py", "    if fraction > 0.0:", "    if False:");
  fs::copy_file(script("replay_ref_data.py"), copy / "replay_ref_data.py",
                fs::copy_options::overwrite_existing);
  const std::vector<Case> held = {
      {"held-out", "--dtype f32", "--eval-fraction 0.25 --batch-size 32 --steps-per-epoch 8"}};
  const auto ignored = replay_cases(held, (copy / "replay_ref.py").string(), dir);
  ASSERT_EQ(ignored.size(), 3u);
  EXPECT_NE(ignored[0].reference, ignored[0].committed) << ignored[0].what;
  EXPECT_NE(ignored[1].reference, ignored[1].committed) << ignored[1].what;
}

// sklearn's digits written by make_digits.py `args` into `dir`/data.
void digits_task_start(const testing::ScratchDir& dir, const std::string& args) {
  ASSERT_EQ(
      testing::run_command(kPython + " " + std::string(VT_SOURCE_DIR) + "/scripts/make_digits.py" +
                               " " + (dir / "data").string() + " " + args,
                           dir.path())
          .exit_code,
      0);
}

// The reference checks every file against its pin before reading it (exit 2, naming the file).
TEST(ReferenceReplayTensors, ReferenceRefusesAFileThatDoesNotMatchItsPin) {
  if (!have_reference())
    GTEST_SKIP() << "python3-torch / numpy / sklearn not installed (scripts/setup.sh)";
  testing::ScratchDir dir;
  ASSERT_NO_FATAL_FAILURE(digits_task_start(dir, "--shards 3"));
  auto init =
      testing::run_command("cd " + dir.path().string() + " && " + testing::veritrain_binary() +
                               " task init --determinism exact --model mlp --dataset tensors "
                               "--option input_dim=64 --option classes=10"
                               " --epochs 1 --steps-per-epoch 1 --batch-size 8 --k 16" +
                               data_files("--shards 3") + " --out task.json",
                           dir.path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  ASSERT_EQ(
      testing::run_command(testing::veritrain_binary() + " train --task " +
                               (dir / "task.json").string() + " --workdir " + (dir / "w").string(),
                           dir.path())
          .exit_code,
      0);
  ASSERT_EQ(testing::run_command(testing::veritrain_binary() + " inspect " + (dir / "w").string() +
                                     " --epoch 0 --out " + (dir / "e0").string(),
                                 dir.path())
                .exit_code,
            0);
  {
    std::fstream f(dir / "data/digits-train-1.safetensors",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  auto r = testing::run_command(kPython + " " + script("replay_ref.py") + " " +
                                    (dir / "task.json").string() + " " + (dir / "e0").string() +
                                    " " + (dir / "ref1").string(),
                                dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("digits-train-1.safetensors: SHA-256 is"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "ref1"));
}

// docs/datasets.md's numpy snippet, run as written: the file it writes is a `tensors` dataset
// that task init pins and train trains on.
TEST(ReferenceReplayTensors, TheDocsNumpySnippetWritesATensorsFileThatTrains) {
  if (!testing::have_python_modules("numpy")) GTEST_SKIP() << "python3-numpy not installed";
  auto doc = read_text_file(fs::path(VT_SOURCE_DIR) / "docs/datasets.md");
  ASSERT_TRUE(doc.ok());
  const std::string begin = "<!-- snippet:tensors:begin -->\n```python\n";
  const std::size_t from = doc->find(begin);
  const std::size_t to = doc->find("```\n<!-- snippet:tensors:end -->");
  ASSERT_TRUE(from != std::string::npos && to != std::string::npos && from < to)
      << "the snippet markers are gone from docs/datasets.md";
  const std::string code = doc->substr(from + begin.size(), to - from - begin.size());
  EXPECT_LE(std::count(code.begin(), code.end(), '\n'), 20);
  testing::ScratchDir dir;
  fs::create_directories(dir / "data");
  ASSERT_TRUE(write_file_atomic(dir / "snippet.py", code).ok());
  auto wrote = testing::run_command("cd " + dir.path().string() + " && " + kPython + " snippet.py",
                                    dir.path());
  ASSERT_EQ(wrote.exit_code, 0) << wrote.err;
  auto init = testing::run_command(
      "cd " + dir.path().string() + " && " + testing::veritrain_binary() +
          " task init --model mlp --dataset tensors --option classes=2 --epochs 1 "
          "--steps-per-epoch 2 --data-file data/train-00.safetensors --out task.json",
      dir.path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  auto train =
      testing::run_command(testing::veritrain_binary() + " train --task " +
                               (dir / "task.json").string() + " --workdir " + (dir / "w").string(),
                           dir.path());
  EXPECT_EQ(train.exit_code, 0) << train.out << train.err;
}

// audit --second-opinion on a requestor's own data: the reference finds the files through the
// task's dataset.path even though it reads the task from a scratch folder.
TEST(ReferenceReplayTensors, AuditSecondOpinionOnOwnDataAgrees) {
  if (!have_reference())
    GTEST_SKIP() << "python3-torch / numpy / sklearn not installed (scripts/setup.sh)";
  testing::ScratchDir dir;
  ASSERT_NO_FATAL_FAILURE(digits_task_start(dir, "--dtype u8"));
  auto init = testing::run_command(
      "cd " + dir.path().string() + " && " + testing::veritrain_binary() +
          " task init --determinism exact --model mlp --dataset tensors --option input_dim=64 "
          "--option classes=10"
          " --option hidden=16 --option layers=1 --epochs 1 --steps-per-epoch 10 --batch-size 32"
          " --eval-fraction 0.2 --optimizer adam --lr 1e-3 --k 16" +
          data_files("") + " --out task.json",
      dir.path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  const fs::path work = dir / "w";
  ASSERT_EQ(testing::run_command(testing::veritrain_binary() + " train --task " +
                                     (dir / "task.json").string() + " --workdir " + work.string(),
                                 dir.path())
                .exit_code,
            0);
  auto r = testing::run_command("cd / && " + testing::veritrain_binary() + " --json audit --task " +
                                    (dir / "task.json").string() + " --workdir " + work.string() +
                                    " --epoch 1 --second-opinion",
                                dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["bit_identical"], true);
  EXPECT_EQ(j["second_opinion"]["status"], "agrees") << j.dump();
  EXPECT_EQ(j["second_opinion"]["reference_root"], committed_roots(work / "commitments.log").at(1));
}

}  // namespace
}  // namespace vt

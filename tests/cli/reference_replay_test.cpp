// docs/training.md is complete when reference/replay_ref.py, written from it in plain PyTorch,
// replays veritrain's epochs bit for bit: its after-states must hash (reference/fingerprint_ref.py)
// to the roots veritrain committed, for every model x optimizer x schedule the reference covers.

#include <gtest/gtest.h>

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

bool have_reference() { return testing::have_python_modules("torch, numpy"); }

struct Combo {
  std::string optimizer;  // sgd-momentum, sgd-nesterov, adam, adamw
  std::string schedule;   // constant, step, cosine
  // The recipes of docs/task.md: "l2" or "inf" clips the gradient norm (binding at 0.1), spares
  // the 1-d parameters weight decay, smooths the labels, averages the weights and augments
  // images; "" for none.
  std::string recipe = "";
  std::string name() const {
    return optimizer + "-" + schedule + (recipe.empty() ? "" : "-recipe-" + recipe);
  }
};

std::vector<Combo> all_combos() {
  std::vector<Combo> out;
  for (const char* o : {"sgd-momentum", "sgd-nesterov", "adam", "adamw"}) {
    for (const char* s : {"constant", "step", "cosine"}) out.push_back({o, s});
  }
  return out;
}

// A tiny task: 2 epochs of 3 steps; warmup crosses the epoch boundary; weight decay everywhere.
json tiny_task(const std::string& model, const Combo& c, const testing::ScratchDir& dir,
               int groups = 1) {
  const std::string file = (dir / "init.json").string();
  // The cnn has up to 72 float tensors (with Adam's moments); a fingerprint samples each once at
  // least.
  const std::string k = model == "mlp" ? "16" : "128";
  const std::string options = model == "mlp" ? " --option hidden=8 --option layers=1"
                                             : " --option width=4 --option blocks=1";
  std::string recipe = c.recipe.empty()
                           ? ""
                           : " --weight-decay 0.01 --clip-grad-norm 0.1 --clip-norm " + c.recipe +
                                 " --no-decay 1d --label-smoothing 0.1 --ema-decay 0.9";
  // Images also get the CIFAR-10 augmentation: zero padding with the l2 norm, reflection with inf.
  if (!c.recipe.empty() && model == "cnn")
    recipe += std::string(" --crop-padding 2 --flip --padding-mode ") +
              (c.recipe == "l2" ? "zero" : "reflect");
  auto init = testing::run_command(
      testing::veritrain_binary() + " task init --determinism exact --model " + model +
          " --epochs 2 --steps-per-epoch 3 --batch-size 4 --data-option samples=16 --seed 11 --k " +
          k + options + recipe + " --out " + file,
      dir.path());
  EXPECT_EQ(init.exit_code, 0) << init.err;
  json task = json::parse(*read_text_file(file));
  task["fingerprint"]["tracking_k"] = std::stoi(k);
  const bool sgd = c.optimizer.rfind("sgd", 0) == 0;
  const json written = task["optimizer"];
  task["optimizer"] = {{"name", sgd ? "sgd" : c.optimizer},
                       {"lr", sgd ? 0.05 : 3e-3},
                       {"weight_decay", c.optimizer == "adamw" ? 0.01 : 1e-4}};
  if (sgd)
    task["optimizer"].update({{"momentum", 0.9}, {"nesterov", c.optimizer == "sgd-nesterov"}});
  for (const char* kept : {"clip_grad_norm", "clip_norm", "no_decay", "ema_decay"})
    if (written.contains(kept)) task["optimizer"][kept] = written[kept];
  if (!c.recipe.empty()) {
    EXPECT_FALSE(task["optimizer"]["no_decay"].empty()) << written.dump();
    EXPECT_EQ(task["loss_options"]["label_smoothing"], 0.1) << task.dump();
    if (model == "cnn") {
      EXPECT_EQ(task["dataset"]["augment"]["flip"], true) << task.dump();
    }
  }
  task["schedule"] = {{"name", c.schedule}, {"warmup_steps", 4}};
  if (c.schedule == "step") task["schedule"].update({{"step_size", 1}, {"gamma", 0.5}});
  if (c.schedule == "cosine") task["schedule"]["min_lr"] = 1e-4;
  if (groups != 1) task["gradient_groups"] = groups;
  return task;
}

std::vector<std::string> reference_roots(const std::vector<std::string>& files,
                                         const testing::ScratchDir& dir) {
  std::string cmd = kPython + " " + script("fingerprint_ref.py") + " --root";
  for (const auto& f : files) cmd += " " + f;
  auto r = testing::run_command(cmd, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> out;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) out.push_back(line);
  return out;
}

// Trains every combination of `model`, replays epoch 2 (from epoch 1) and for SGD epoch 1 (from
// epoch 0) with `replayer`, and returns (what, reference root, committed root) per replay.
std::vector<Compared> replay_all(const std::string& model, const std::vector<Combo>& combos,
                                 const std::string& replayer, const testing::ScratchDir& dir,
                                 int groups = 1) {
  std::string jobs;
  std::vector<std::string> outputs;
  std::vector<Compared> out;
  for (const Combo& c : combos) {
    const fs::path work = dir / (model + "-" + c.name());
    fs::create_directories(work);
    const std::string task = (work / "task.json").string();
    EXPECT_TRUE(write_file_atomic(task, tiny_task(model, c, dir, groups).dump()).ok());
    auto train = testing::run_command(testing::veritrain_binary() + " train --task " + task +
                                          " --workdir " + (work / "w").string(),
                                      dir.path());
    EXPECT_EQ(train.exit_code, 0) << c.name() << ": " << train.err;
    const auto roots = committed_roots(work / "w/commitments.log");
    EXPECT_EQ(roots.size(), 3u) << c.name();
    if (roots.size() != 3) continue;
    // Epoch 2 starts from a state with filled optimizer slots and a schedule past its first
    // epoch; epoch 1 adds only SGD's first-step buffer copy, so it is replayed for SGD (and for
    // the first combination, whose epoch 0 the initial-state check needs). Each export loads
    // LibTorch: fewer of them keep the test short.
    const bool first = &c == &combos.front();
    for (int e : {0, 1}) {
      if (e == 0 && !first && c.optimizer.rfind("sgd", 0) != 0) continue;
      const std::string before = (work / "e").string() + std::to_string(e);
      const std::string after = (work / "ref").string() + std::to_string(e + 1);
      auto exported =
          testing::run_command(testing::veritrain_binary() + " inspect " + (work / "w").string() +
                                   " --epoch " + std::to_string(e) + " --out " + before,
                               dir.path());
      EXPECT_EQ(exported.exit_code, 0) << exported.err;
      jobs.append(" ").append(task).append(" ").append(before).append(" ").append(after);
      outputs.push_back(after);
      out.push_back({model + " " + c.name() + " epoch " + std::to_string(e + 1), "", roots[e + 1]});
    }
    if (first) {  // the initial state from the seed, once per model
      const std::string init = (work / "ref0").string();
      jobs.append(" --init ")
          .append(task)
          .append(" ")
          .append((work / "e0").string())
          .append(" ")
          .append(init);
      outputs.push_back(init);
      out.push_back({model + " initial state", "", roots[0]});
    }
  }
  auto r = testing::run_command(kPython + " " + replayer + jobs, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto refs = reference_roots(outputs, dir);
  EXPECT_EQ(refs.size(), out.size());
  for (std::size_t i = 0; i < out.size() && i < refs.size(); ++i) out[i].reference = refs[i];
  return out;
}

void expect_all_equal(const std::vector<Compared>& results) {
  ASSERT_FALSE(results.empty());
  for (const Compared& c : results) EXPECT_EQ(c.reference, c.committed) << c.what;
}

// A copy of the reference with the Irwin-Hall scale of normal() changed (docs/training.md, "PRNG";
// the PRNG is in ref_common.py, which the reference imports from its own folder).
std::string changed_reference(const testing::ScratchDir& dir) {
  std::string text = *read_text_file(script("ref_common.py"));
  const std::string constant = "np.float32(1.7320508)";
  EXPECT_NE(text.find(constant), std::string::npos);
  if (text.find(constant) != std::string::npos)
    text.replace(text.find(constant), constant.size(), "np.float32(1.7320509)");
  EXPECT_TRUE(write_file_atomic(dir / "ref_common.py", text).ok());
  std::string copy = (dir / "replay_changed.py").string();
  fs::copy_file(script("replay_ref.py"), copy, fs::copy_options::overwrite_existing);
  fs::copy_file(script("replay_ref_data.py"), dir / "replay_ref_data.py",
                fs::copy_options::overwrite_existing);
  fs::copy_file(script("veritrain_zoo.py"), dir / "veritrain_zoo.py",
                fs::copy_options::overwrite_existing);
  return copy;
}

TEST(ReferenceReplay, MlpEveryOptimizerAndScheduleBitIdentical) {
  if (!have_reference())
    GTEST_SKIP() << "python3-torch / python3-numpy not installed (scripts/setup.sh)";
  testing::ScratchDir dir;
  expect_all_equal(replay_all("mlp", all_combos(), script("replay_ref.py"), dir));
}

TEST(ReferenceReplay, CnnEveryOptimizerAndScheduleBitIdentical) {
  if (!have_reference())
    GTEST_SKIP() << "python3-torch / python3-numpy not installed (scripts/setup.sh)";
  testing::ScratchDir dir;
  expect_all_equal(replay_all("cnn", all_combos(), script("replay_ref.py"), dir));
}

// Gradient groups (docs/training.md): 4 groups of 1 example, summed along the tree, BatchNorm
// buffers averaged the same way; one SGD and one Adam combination per model.
TEST(ReferenceReplay, GradientGroupsBitIdentical) {
  if (!have_reference())
    GTEST_SKIP() << "python3-torch / python3-numpy not installed (scripts/setup.sh)";
  testing::ScratchDir dir;
  const std::vector<Combo> combos = {{"sgd-momentum", "cosine"}, {"adamw", "step"}};
  expect_all_equal(replay_all("mlp", combos, script("replay_ref.py"), dir, 4));
  expect_all_equal(replay_all("cnn", combos, script("replay_ref.py"), dir, 2));
}

// The recipes (docs/task.md, "Recipes"; docs/training.md): the gradient's global norm clipped in
// either norm, decay spared on the 1-d parameters, label smoothing, a moving average of the
// weights (timm's update), and for the cnn torchvision's crop and flip with veritrain's draws;
// with SGD and both Adams.
TEST(ReferenceReplay, RecipesBitIdentical) {
  if (!have_reference())
    GTEST_SKIP() << "python3-torch / python3-numpy not installed (scripts/setup.sh)";
  testing::ScratchDir dir;
  const std::vector<Combo> combos = {
      {"sgd-nesterov", "cosine", "l2"}, {"adamw", "step", "inf"}, {"adam", "constant", "l2"}};
  expect_all_equal(replay_all("mlp", combos, script("replay_ref.py"), dir));
  expect_all_equal(replay_all("cnn", combos, script("replay_ref.py"), dir));
}

// The comparison can fail: one documented constant changed in a copy of the reference (the
// Irwin-Hall scale of normal(), docs/training.md "PRNG") changes the data, hence every root.
TEST(ReferenceReplay, ChangedConstantInACopyOfTheReferenceDisagrees) {
  if (!have_reference())
    GTEST_SKIP() << "python3-torch / python3-numpy not installed (scripts/setup.sh)";
  testing::ScratchDir dir;
  const auto results =
      replay_all("mlp", {{"sgd-momentum", "constant"}}, changed_reference(dir), dir);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_NE(results[0].reference, results[0].committed) << results[0].what;
  EXPECT_NE(results[1].reference, results[1].committed) << results[1].what;
  EXPECT_EQ(results[2].reference, results[2].committed)
      << "the initial state draws no synthetic data";
}

json audit(const fs::path& task, const fs::path& work, const std::string& extra,
           const testing::ScratchDir& dir) {
  auto r = testing::run_command(testing::veritrain_binary() + " --json audit --task " +
                                    task.string() + " --workdir " + work.string() +
                                    " --epoch 1 --second-opinion " + extra,
                                dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = json::parse(r.out, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

// audit --second-opinion: the reference's verdict on veritrain's replay, inside the signed
// evidence.
TEST(ReferenceReplay, AuditSecondOpinionIsRecordedInTheEvidence) {
  if (!have_reference())
    GTEST_SKIP() << "python3-torch / python3-numpy not installed (scripts/setup.sh)";
  testing::ScratchDir dir;
  const fs::path task = dir / "task.json", work = dir / "w";
  ASSERT_TRUE(write_file_atomic(task, tiny_task("mlp", {"adamw", "cosine"}, dir).dump()).ok());
  ASSERT_EQ(testing::run_command(testing::veritrain_binary() + " train --task " + task.string() +
                                     " --workdir " + work.string(),
                                 dir.path())
                .exit_code,
            0);
  const auto roots = committed_roots(work / "commitments.log");
  ASSERT_EQ(roots.size(), 3u);

  json agrees = audit(task, work, "--evidence " + (dir / "evidence.json").string(), dir);
  EXPECT_EQ(agrees["bit_identical"], true);
  EXPECT_EQ(agrees["second_opinion"]["status"], "agrees") << agrees.dump();
  EXPECT_EQ(agrees["second_opinion"]["reference_root"], roots[1]);
  json evidence = json::parse(*read_text_file(dir / "evidence.json"));
  EXPECT_EQ(evidence["evidence"]["finding"]["second_opinion"], agrees["second_opinion"]);
  auto check = testing::run_command(testing::veritrain_binary() + " audit --task " + task.string() +
                                        " --workdir " + work.string() + " --check " +
                                        (dir / "evidence.json").string(),
                                    dir.path());
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;

  json disagrees = audit(task, work, "--reference " + changed_reference(dir), dir);
  EXPECT_EQ(disagrees["bit_identical"], true);
  EXPECT_EQ(disagrees["second_opinion"]["status"], "disagrees") << disagrees.dump();
  EXPECT_NE(disagrees["second_opinion"]["reference_root"], roots[1]);
}

TEST(ReferenceReplay, AuditSecondOpinionSaysWhatItDoesNotCover) {
  if (!have_reference())
    GTEST_SKIP() << "python3-torch / python3-numpy not installed (scripts/setup.sh)";
  testing::ScratchDir dir;
  const fs::path task = dir / "task.json", work = dir / "w";
  ASSERT_EQ(testing::run_command(
                testing::veritrain_binary() +
                    " task init --determinism exact --model conv3d --option size=4 --epochs 1 "
                    "--steps-per-epoch 1 --batch-size 2 --data-option samples=2 --k 32 --out " +
                    task.string(),
                dir.path())
                .exit_code,
            0);
  json t = json::parse(*read_text_file(task));
  t["fingerprint"]["tracking_k"] = 32;
  ASSERT_TRUE(write_file_atomic(task, t.dump()).ok());
  auto train = testing::run_command(testing::veritrain_binary() + " train --task " + task.string() +
                                        " --workdir " + work.string(),
                                    dir.path());
  ASSERT_EQ(train.exit_code, 0) << train.err;
  json j = audit(task, work, "", dir);
  EXPECT_EQ(j["second_opinion"]["status"], "not_covered") << j.dump();
  EXPECT_TRUE(j["second_opinion"]["reference_root"].is_null());
  EXPECT_NE(j["second_opinion"]["detail"].get<std::string>().find("conv3d"), std::string::npos)
      << j.dump();
}

}  // namespace
}  // namespace vt

#include "protocol/task.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/file_io.h"
#include "tests/test_util.h"

namespace vt {
namespace {

constexpr std::string_view kMinimal =
    R"({"model": {"name": "mlp"}, "dataset": {"name": "synthetic"}, "epochs": 3, "batch_size": 32})";

// The worked example of docs/task.md: if this id changes, every task file ever written changes
// id too, so the docs and the golden must change together with a version bump.
constexpr std::string_view kExample = R"({
  "model": {"name": "cnn", "options": {"width": 16}},
  "dataset": {"name": "synthetic", "options": {"samples": 512}},
  "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4},
  "schedule": {"name": "cosine", "min_lr": 0.001, "warmup_steps": 10},
  "epochs": 4, "steps_per_epoch": 16, "batch_size": 32, "seed": 42
})";
constexpr std::string_view kExampleCanonical =
    R"({"batch_size":32,"dataset":{"files":{},"name":"synthetic","options":{"samples":512},"path":""},)"
    R"("determinism":"exact","device":"cpu","epochs":4,"fingerprint":{"k":1024,"tracking_k":256,)"
    R"("trail_interval":0},"intra_op_threads":1,"loss":"cross_entropy","model":{"name":"cnn",)"
    R"("options":{"width":16},"path":"","sha256":""},"optimizer":{"beta1":0.9,"beta2":0.999,)"
    R"("eps":1e-08,"lr":0.05,"momentum":0.9,"name":"sgd","nesterov":false,"weight_decay":0.0005},)"
    R"("precision":"fp32","schedule":{"gamma":0.1,"min_lr":0.001,"name":"cosine","step_size":1,)"
    R"("warmup_steps":10},"seed":42,"steps_per_epoch":16,"tolerance":{"atol":0.0,)"
    R"("max_outlier_fraction":0.0,"rel_l2":0.0,"rtol":0.0},"version":1})";
constexpr std::string_view kExampleId =
    "88c4caa8e29e58a12d5c1410fbf91bf15ff4b0498582327a3ba8a68ebbd1cec3";

std::string error_of(std::string_view text) {
  auto task = parse_task(text, "task.json");
  return task.ok() ? std::string("(accepted)") : task.error().message;
}

TEST(Task, MinimalTaskGetsDocumentedDefaults) {
  auto task = parse_task(kMinimal);
  ASSERT_TRUE(task.ok()) << task.error().message;
  EXPECT_EQ(task->model.name, "mlp");
  EXPECT_EQ(task->dataset.name, "synthetic");
  EXPECT_EQ(task->epochs, 3);
  EXPECT_EQ(task->batch_size, 32);
  EXPECT_EQ(task->optimizer.name, "sgd");
  EXPECT_EQ(task->optimizer.lr, 0.01);
  EXPECT_EQ(task->schedule.name, "constant");
  EXPECT_EQ(task->loss, "cross_entropy");
  EXPECT_EQ(task->device, Device::kCpu);
  EXPECT_EQ(task->determinism, Determinism::kExact);
  EXPECT_EQ(task->precision, Precision::kFp32);
  EXPECT_EQ(task->seed, 0u);
  EXPECT_EQ(task->intra_op_threads, 1);
  EXPECT_EQ(task->fingerprint.k, 1024);
}

TEST(Task, CanonicalFormAndIdAreGolden) {
  auto task = parse_task(kExample);
  ASSERT_TRUE(task.ok()) << task.error().message;
  EXPECT_EQ(canonical_task_json(*task), kExampleCanonical);
  EXPECT_EQ(hex_encode(task_id(*task)), kExampleId);
}

TEST(Task, CanonicalAndPrettyFormsRoundTrip) {
  auto task = parse_task(kExample);
  ASSERT_TRUE(task.ok());
  auto again = parse_task(canonical_task_json(*task));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(canonical_task_json(*again), canonical_task_json(*task));
  auto pretty = parse_task(pretty_task_json(*task));
  ASSERT_TRUE(pretty.ok()) << pretty.error().message;
  EXPECT_EQ(task_id(*pretty), task_id(*task));
  EXPECT_NE(pretty_task_json(*task).find("\n  \"batch_size\": 32,\n"), std::string::npos);
  EXPECT_EQ(pretty_task_json(*task).back(), '}');  // callers add their own newline
}

TEST(Task, IdIgnoresSpellingButNotMeaning) {
  // Key order, whitespace, 1 vs 1.0 and explicit defaults are spelling, not meaning.
  auto a = parse_task(R"({"batch_size":32,"epochs":3,"dataset":{"name":"synthetic"},)"
                      R"("model":{"name":"mlp"},"optimizer":{"lr":1,"beta1":0.9},"seed":0})");
  auto b = parse_task(R"({ "model":{"name":"mlp"}, "dataset":{"name":"synthetic","options":{}},)"
                      R"( "epochs":3, "batch_size":32, "optimizer":{"lr":1.0}, "version":1 })");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(task_id(*a), task_id(*b));
  Task c = *a;
  c.optimizer.lr = 1.0000000000000002;  // the next double: one ulp is another task
  EXPECT_NE(task_id(c), task_id(*a));
  Task d = *a;
  d.seed = 1;
  EXPECT_NE(task_id(d), task_id(*a));
}

TEST(Task, SeedIsAFullU64) {
  auto task = parse_task(R"({"model":{"name":"mlp"},"dataset":{"name":"synthetic"},"epochs":1,)"
                         R"("batch_size":1,"seed":18446744073709551615})");
  ASSERT_TRUE(task.ok()) << task.error().message;
  EXPECT_EQ(task->seed, 18446744073709551615ull);
  EXPECT_NE(canonical_task_json(*task).find("\"seed\":18446744073709551615"), std::string::npos);
  EXPECT_EQ(parse_task(canonical_task_json(*task))->seed, task->seed);
}

TEST(Task, TorchscriptAndPinnedFilesAreAccepted) {
  std::string digest(64, 'a');
  auto task = parse_task(
      R"({"model":{"name":"torchscript","path":"m.pt","sha256":")" + digest +
      R"("},"dataset":{"name":"mnist","path":"data","files":{"train-images-idx3-ubyte":")" +
      digest + R"("}},"epochs":1,"batch_size":8,"loss":"mse"})");
  ASSERT_TRUE(task.ok()) << task.error().message;
  EXPECT_EQ(task->model.sha256, digest);
  EXPECT_EQ(task->dataset.files.at("train-images-idx3-ubyte"), digest);
}

// The portable arithmetic's version came after the golden id: absent from the canonical form at
// 1, so every portable task written before keeps its id; shown in the pretty form.
TEST(Task, PortableArithmeticIsCanonicalOnlyAboveOne) {
  auto task = parse_task(
      R"({"model":{"name":"mlp"},"dataset":{"name":"synthetic"},"epochs":1,"batch_size":8,)"
      R"("determinism":"portable"})");
  ASSERT_TRUE(task.ok()) << task.error().message;
  EXPECT_EQ(task->portable_arithmetic, 1);
  EXPECT_EQ(canonical_task_json(*task).find("portable_arithmetic"), std::string::npos);
  EXPECT_NE(pretty_task_json(*task).find("\"portable_arithmetic\": 1"), std::string::npos);
  Task two = *task;
  two.portable_arithmetic = 2;
  EXPECT_NE(canonical_task_json(two).find(R"("portable_arithmetic":2)"), std::string::npos);
  EXPECT_NE(task_id(two), task_id(*task));
  EXPECT_EQ(task_id(*parse_task(canonical_task_json(two))), task_id(two));
}

// The recipe fields came after the golden id: a task without them keeps its id; a task with them
// round-trips, and each one changes the id.
TEST(Task, RecipeFieldsAreCanonicalOnlyWhenSet) {
  auto plain = parse_task(kExample);
  ASSERT_TRUE(plain.ok());
  const std::string canonical = canonical_task_json(*plain);
  for (const char* field : {"clip_grad_norm", "clip_norm", "no_decay", "ema_decay", "loss_options"})
    EXPECT_EQ(canonical.find(field), std::string::npos) << field;
  auto recipe = parse_task(
      R"({"model":{"name":"mlp"},"dataset":{"name":"synthetic"},"epochs":1,"batch_size":8,)"
      R"("optimizer":{"weight_decay":0.01,"clip_grad_norm":1.5,"clip_norm":"inf",)"
      R"("no_decay":["fc1.bias","fc2.bias"],"ema_decay":0.999},)"
      R"("loss_options":{"label_smoothing":0.1}})");
  ASSERT_TRUE(recipe.ok()) << recipe.error().message;
  EXPECT_EQ(recipe->optimizer.clip_grad_norm, 1.5);
  EXPECT_EQ(recipe->optimizer.clip_norm, "inf");
  EXPECT_EQ(recipe->optimizer.no_decay, (std::vector<std::string>{"fc1.bias", "fc2.bias"}));
  EXPECT_EQ(recipe->loss_options.label_smoothing, 0.1);
  EXPECT_EQ(recipe->optimizer.ema_decay, 0.999);
  EXPECT_EQ(task_id(*parse_task(canonical_task_json(*recipe))), task_id(*recipe));
  EXPECT_EQ(task_id(*parse_task(pretty_task_json(*recipe))), task_id(*recipe));
  Task other = *recipe;
  other.optimizer.no_decay.pop_back();
  EXPECT_NE(task_id(other), task_id(*recipe));
  other = *recipe;
  other.loss_options.label_smoothing = 0.2;
  EXPECT_NE(task_id(other), task_id(*recipe));
  other = *recipe;
  other.optimizer.clip_norm = "l2";
  EXPECT_NE(task_id(other), task_id(*recipe));
  other = *recipe;
  other.optimizer.ema_decay = 0.99;
  EXPECT_NE(task_id(other), task_id(*recipe));
}

// dataset.augment: absent from the canonical form unless it does something, and then with only
// its fields off their defaults; each one changes the id.
TEST(Task, AugmentIsCanonicalOnlyWhenItDoesSomething) {
  const std::string head = R"({"model":{"name":"cnn"},"dataset":{"name":"synthetic","augment":)";
  const std::string tail = R"(},"epochs":1,"batch_size":8})";
  auto plain = parse_task(kExample);
  auto nothing = parse_task(head + R"({"crop_padding":0,"flip":false})" + tail);
  ASSERT_TRUE(plain.ok() && nothing.ok()) << nothing.error().message;
  EXPECT_EQ(canonical_task_json(*nothing).find("augment"), std::string::npos);
  auto crop =
      parse_task(head + R"({"crop_padding":4,"padding_mode":"reflect","flip":true})" + tail);
  ASSERT_TRUE(crop.ok()) << crop.error().message;
  EXPECT_EQ(crop->dataset.augment, (AugmentSpec{4, "reflect", true}));
  const std::string canonical = canonical_task_json(*crop);
  EXPECT_NE(canonical.find(R"("augment":{"crop_padding":4,"flip":true,"padding_mode":"reflect"})"),
            std::string::npos)
      << canonical;
  EXPECT_EQ(task_id(*parse_task(canonical)), task_id(*crop));
  EXPECT_EQ(task_id(*parse_task(pretty_task_json(*crop))), task_id(*crop));
  auto flip = parse_task(head + R"({"flip":true})" + tail);
  ASSERT_TRUE(flip.ok());
  EXPECT_NE(canonical_task_json(*flip).find(R"("augment":{"flip":true})"), std::string::npos);
  Task other = *crop;
  other.dataset.augment.padding_mode = "zero";
  EXPECT_NE(task_id(other), task_id(*crop));
  other.dataset.augment.flip = false;
  EXPECT_NE(task_id(other), task_id(*crop));

  EXPECT_EQ(error_of(head + R"({"crop_padding":-1})" + tail),
            "task.json: dataset.augment.crop_padding: expected an integer in [0, 256], got -1");
  EXPECT_EQ(
      error_of(head + R"({"crop_padding":4,"padding_mode":"edge"})" + tail),
      R"(task.json: dataset.augment.padding_mode: expected one of "zero", "reflect", got "edge")");
  EXPECT_EQ(error_of(head + R"({"padding_mode":"reflect","flip":true})" + tail),
            "task.json: dataset.augment.padding_mode: only applies to dataset.augment.crop_padding "
            "> 0; leave it at \"zero\" (got \"reflect\")");
  EXPECT_EQ(error_of(head + R"({"flip":1})" + tail),
            "task.json: dataset.augment.flip: expected true or false, got 1");
  EXPECT_EQ(error_of(head + R"({"rotate":15})" + tail),
            "task.json: dataset.augment.rotate: unknown field (dataset.augment has: crop_padding, "
            "flip, padding_mode)");
}

// The eval split's fields came after the golden id: written only when set, so a task without
// them keeps its id, and a task with them round-trips through its canonical form.
TEST(Task, EvalSplitFieldsAreCanonicalOnlyWhenSet) {
  auto plain = parse_task(kExample);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(canonical_task_json(*plain).find("eval_"), std::string::npos);
  std::string digest(64, 'b');
  auto split = parse_task(
      R"({"model":{"name":"mlp"},"dataset":{"name":"tensors","path":"d","files":{"a.safetensors":")" +
      std::string(64, 'a') + R"("},"eval_files":{"e.safetensors":")" + digest +
      R"("}},"epochs":1,"batch_size":8})");
  ASSERT_TRUE(split.ok()) << split.error().message;
  const std::string canonical = canonical_task_json(*split);
  EXPECT_NE(canonical.find(R"("eval_files":{"e.safetensors":")" + digest + "\"}"),
            std::string::npos)
      << canonical;
  EXPECT_EQ(task_id(*parse_task(canonical)), task_id(*split));
  Task both = *split;
  both.dataset.eval_fraction = 0.1;
  EXPECT_EQ(validate_task(both).error().message,
            "task: dataset.eval_fraction: set either eval_fraction or eval_files, not both");
  both.dataset.eval_files = {{"a.safetensors", digest}};
  both.dataset.eval_fraction = 0.0;
  EXPECT_EQ(validate_task(both).error().message,
            "task: dataset.eval_files.a.safetensors: is also a training file; held-out data must "
            "be other data");
  Task fraction = *split;
  fraction.dataset.eval_files.clear();
  fraction.dataset.eval_fraction = 0.2;
  EXPECT_NE(canonical_task_json(fraction).find(R"("eval_fraction":0.2)"), std::string::npos);
  fraction.dataset.eval_fraction = 1.0;
  EXPECT_FALSE(validate_task(fraction).ok());
}

struct BadCase {
  std::string patch;     // spliced into kMinimal's object
  std::string expected;  // the whole message after "task.json: "
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.patch; }

class TaskRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(TaskRejects, NamesFieldAndExpectation) {
  std::string text(kMinimal);
  text.insert(1, GetParam().patch + ",");
  EXPECT_EQ(error_of(text), "task.json: " + GetParam().expected);
}

const std::string kHex(64, 'a');

INSTANTIATE_TEST_SUITE_P(
    Fields, TaskRejects,
    ::testing::Values(
        BadCase{R"("optimizer":{"lr":-1})", "optimizer.lr: expected a number > 0, got -1"},
        BadCase{R"("optimizer":{"lr":"0.1"})", R"(optimizer.lr: expected a number, got "0.1")"},
        BadCase{
            R"("optimizer":{"learning_rate":0.1})",
            "optimizer.learning_rate: unknown field (optimizer has: beta1, beta2, clip_grad_norm, "
            "clip_norm, ema_decay, eps, lr, momentum, name, nesterov, no_decay, weight_decay)"},
        BadCase{R"("optimiser":{})",
                "optimiser: unknown field (the task has: batch_size, dataset, determinism, device, "
                "environments, epochs, fingerprint, gradient_groups, intra_op_threads, loss, "
                "loss_options, model, optimizer, portable_arithmetic, precision, schedule, seed, "
                "steps_per_epoch, "
                "tolerance, version, world_size)"},
        BadCase{R"("determinism":"portable","portable_arithmetic":0)",
                "portable_arithmetic: expected an integer >= 1, got 0"},
        BadCase{R"("portable_arithmetic":2)",
                "portable_arithmetic: only applies to determinism \"portable\"; leave it at 1 "
                "(got 2)"},
        BadCase{R"("optimizer":{"name":"lbfgs"})",
                R"(optimizer.name: expected one of "sgd", "adam", "adamw", got "lbfgs")"},
        BadCase{R"("optimizer":{"momentum":1})",
                "optimizer.momentum: expected a number in [0, 1), got 1"},
        BadCase{R"("optimizer":{"nesterov":1})",
                "optimizer.nesterov: expected true or false, got 1"},
        BadCase{R"("optimizer":{"nesterov":true})",
                "optimizer.nesterov: requires optimizer.momentum > 0"},
        BadCase{R"("optimizer":{"beta1":0.5})",
                "optimizer.beta1: only applies to adam and adamw; leave it at 0.9 (got 0.5)"},
        BadCase{R"("optimizer":{"name":"adam","momentum":0.9})",
                "optimizer.momentum: only applies to sgd; leave it at 0 (got 0.9)"},
        BadCase{R"("optimizer":{"name":"adamw","eps":0})",
                "optimizer.eps: expected a number > 0, got 0"},
        BadCase{
            R"("optimizer":{"weight_decay":1e999})",
            "not valid JSON: [json.exception.out_of_range.406] number overflow parsing '1e999'"},
        BadCase{R"("optimizer":3)", "optimizer: expected an object, got 3"},
        BadCase{R"("optimizer":{"clip_grad_norm":-1})",
                "optimizer.clip_grad_norm: expected a number >= 0, got -1"},
        BadCase{R"("optimizer":{"clip_grad_norm":1,"clip_norm":"l1"})",
                R"(optimizer.clip_norm: expected one of "l2", "inf", got "l1")"},
        BadCase{R"("optimizer":{"clip_norm":"inf"})",
                "optimizer.clip_norm: only applies to a task with optimizer.clip_grad_norm > 0; "
                "leave it at \"l2\" (got \"inf\")"},
        BadCase{R"("optimizer":{"weight_decay":0.1,"no_decay":["b","a"]})",
                "optimizer.no_decay[1]: names must be sorted and unique (after \"b\")"},
        BadCase{R"("optimizer":{"weight_decay":0.1,"no_decay":[""]})",
                R"(optimizer.no_decay[0]: expected a parameter name, got "")"},
        BadCase{R"("optimizer":{"no_decay":["fc.bias"]})",
                "optimizer.no_decay: only applies with optimizer.weight_decay > 0"},
        BadCase{R"("optimizer":{"weight_decay":0.1,"no_decay":"fc.bias"})",
                R"(optimizer.no_decay: expected an array of strings, got "fc.bias")"},
        BadCase{R"("optimizer":{"ema_decay":1})",
                "optimizer.ema_decay: expected a number in [0, 1), got 1"},
        BadCase{R"("loss_options":{"label_smoothing":1})",
                "loss_options.label_smoothing: expected a number in [0, 1), got 1"},
        BadCase{R"("loss":"mse","loss_options":{"label_smoothing":0.1})",
                "loss_options.label_smoothing: only applies to loss cross_entropy; leave it at 0 "
                "(got 0.1)"},
        BadCase{R"("loss_options":{"smoothing":0.1})",
                "loss_options.smoothing: unknown field (loss_options has: label_smoothing)"},
        BadCase{R"("schedule":{"name":"linear"})",
                R"(schedule.name: expected one of "constant", "step", "cosine", got "linear")"},
        BadCase{R"("schedule":{"name":"step","step_size":0})",
                "schedule.step_size: expected an integer >= 1, got 0"},
        BadCase{R"("schedule":{"gamma":0.5})",
                R"(schedule.gamma: only applies to schedule "step"; leave it at 0.1 (got 0.5))"},
        BadCase{R"("schedule":{"name":"cosine","min_lr":0.5})",
                "schedule.min_lr: expected a number <= optimizer.lr (0.01), got 0.5"},
        BadCase{R"("schedule":{"warmup_steps":2.5})",
                "schedule.warmup_steps: expected a 64-bit integer, got 2.5"},
        BadCase{R"("loss":"hinge")",
                R"(loss: expected one of "cross_entropy", "mse", "model", got "hinge")"},
        BadCase{R"("device":"tpu")", R"(device: expected one of "cpu", "cuda", got "tpu")"},
        BadCase{R"("determinism":"loose")",
                R"(determinism: expected one of "exact", "portable", "tolerance", got "loose")"},
        BadCase{R"("precision":"fp16")",
                R"(precision: expected one of "fp32", "tf32", "bf16", got "fp16")"},
        BadCase{R"("intra_op_threads":0)", "intra_op_threads: expected an integer >= 1, got 0"},
        BadCase{R"("steps_per_epoch":-1)", "steps_per_epoch: expected an integer >= 0, got -1"},
        BadCase{R"("seed":-1)", "seed: expected an integer in [0, 2^64 - 1], got -1"},
        BadCase{R"("seed":18446744073709551616)",
                "seed: expected an integer in [0, 2^64 - 1], got 1.8446744073709552e+19"},
        BadCase{R"("version":2)",
                "version: expected 1 (the only task format this build reads), got 2"},
        BadCase{R"("fingerprint":{"k":0})", "fingerprint.k: expected an integer >= 1, got 0"},
        BadCase{R"("fingerprint":{"trail_interval":-5})",
                "fingerprint.trail_interval: expected an integer >= 0, got -5"},
        BadCase{R"("tolerance":{"atol":-0.1})", "tolerance.atol: expected a number >= 0, got -0.1"},
        BadCase{R"("tolerance":{"max_outlier_fraction":1.5})",
                "tolerance.max_outlier_fraction: expected a number in [0, 1], got 1.5"},
        BadCase{R"("tolerance":{"rtol":null})", "tolerance.rtol: expected a number, got null"}),
    testing::ValueName());

// kMinimal's own fields are replaced rather than prefixed: these need a different base.
TEST(Task, RejectsBadRequiredAndNestedFields) {
  EXPECT_EQ(error_of(R"({"dataset":{"name":"synthetic"},"epochs":1,"batch_size":1})"),
            "task.json: model: missing; expected an object (this field is required)");
  EXPECT_EQ(error_of(R"({"model":{},"dataset":{"name":"synthetic"},"epochs":1,"batch_size":1})"),
            "task.json: model.name: missing; expected a string (this field is required)");
  EXPECT_EQ(error_of(R"({"model":{"name":"mlp"},"dataset":{"name":"synthetic"},"batch_size":1})"),
            "task.json: epochs: missing; expected an integer (this field is required)");
  EXPECT_EQ(
      error_of(
          R"({"model":{"name":"mlp"},"dataset":{"name":"synthetic"},"epochs":0,"batch_size":1})"),
      "task.json: epochs: expected an integer >= 1, got 0");
  EXPECT_EQ(
      error_of(
          R"({"model":{"name":"mlp"},"dataset":{"name":"synthetic"},"epochs":1,"batch_size":0})"),
      "task.json: batch_size: expected an integer >= 1, got 0");
  EXPECT_EQ(
      error_of(
          R"({"model":{"name":"m l p"},"dataset":{"name":"synthetic"},"epochs":1,"batch_size":1})"),
      R"(task.json: model.name: expected a name of 1-64 letters, digits, '_', '-' or '.', got "m l p")");
  EXPECT_EQ(
      error_of(
          R"({"model":{"name":"mlp","options":{"width":1.5}},"dataset":{"name":"synthetic"},"epochs":1,"batch_size":1})"),
      "task.json: model.options.width: expected a 64-bit integer, got 1.5");
  EXPECT_EQ(
      error_of(
          R"({"model":{"name":"torchscript","path":"m.pt"},"dataset":{"name":"synthetic"},"epochs":1,"batch_size":1})"),
      R"(task.json: model.sha256: expected a SHA-256 as 64 lower-case hex digits, got "")");
  EXPECT_EQ(error_of(R"({"model":{"name":"torchscript","sha256":")" + kHex +
                     R"("},"dataset":{"name":"synthetic"},"epochs":1,"batch_size":1})"),
            R"(task.json: model.path: required for model "torchscript")");
  EXPECT_EQ(
      error_of(
          R"({"model":{"name":"mlp","path":"m.pt"},"dataset":{"name":"synthetic"},"epochs":1,"batch_size":1})"),
      R"(task.json: model.path: only applies to model "torchscript"; leave it at "" (got "m.pt"))");
  std::string upper(64, 'A');
  EXPECT_EQ(
      error_of(R"({"model":{"name":"mlp"},"dataset":{"name":"mnist","path":"d","files":{"a":")" +
               upper + R"("}},"epochs":1,"batch_size":1})"),
      R"(task.json: dataset.files.a: expected a SHA-256 as 64 lower-case hex digits, got ")" +
          upper + "\"");
  EXPECT_EQ(
      error_of(R"({"model":{"name":"mlp"},"dataset":{"name":"mnist","path":"d","files":{"../x":")" +
               kHex + R"("}},"epochs":1,"batch_size":1})"),
      "task.json: dataset.files.../x: a file name must be a plain name inside dataset.path");
  EXPECT_EQ(
      error_of(
          R"({"model":{"name":"mlp"},"dataset":{"name":"mnist","path":"d"},"epochs":1,"batch_size":1})"),
      "task.json: dataset.files: must pin at least one file when dataset.path is set");
  EXPECT_EQ(error_of(R"({"model":{"name":"mlp"},"dataset":{"name":"mnist","files":{"a":")" + kHex +
                     R"("}},"epochs":1,"batch_size":1})"),
            "task.json: dataset.path: required when dataset.files pins files");
}

TEST(Task, RejectsMalformedDocuments) {
  EXPECT_EQ(error_of("[1,2]"), "task.json: expected a JSON object, got an array");
  EXPECT_NE(error_of("{\"model\":").find("task.json: not valid JSON: "), std::string::npos);
  EXPECT_NE(error_of(std::string(kMinimal) + " x").find("task.json: not valid JSON: "),
            std::string::npos);
  std::string dup(kMinimal);
  dup.insert(1, R"("optimizer":{"lr":0.1,"lr":10},)");
  EXPECT_EQ(error_of(dup), "task.json: optimizer.lr: field appears twice");
}

TEST(Task, ValidateCatchesTasksBuiltInCode) {
  Task task;
  task.model.name = "mlp";
  task.dataset.name = "synthetic";
  EXPECT_TRUE(validate_task(task).ok());
  task.optimizer.lr = std::nan("");
  auto status = validate_task(task, "--lr");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().message, "--lr: optimizer.lr: expected a number > 0, got null");
  task.optimizer.lr = 0.1;
  task.model.path = std::string("bad\xff", 4);
  ASSERT_FALSE(validate_task(task).ok());
  EXPECT_EQ(validate_task(task).error().message, "task: model.path: is not valid UTF-8");
}

TEST(Task, LoadNamesTheFile) {
  testing::ScratchDir dir;
  auto path = (dir / "task.json").string();
  ASSERT_TRUE(write_file_atomic(path, std::string_view(R"({"model":{"name":"mlp"}})")).ok());
  auto task = load_task(path);
  ASSERT_FALSE(task.ok());
  EXPECT_EQ(task.error().message,
            path + ": dataset: missing; expected an object (this field is required)");
  EXPECT_EQ(task.error().code, Errc::kInvalidInput);
  auto absent = load_task((dir / "nope.json").string());
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.error().message.find("nope.json"), std::string::npos);
}

}  // namespace
}  // namespace vt

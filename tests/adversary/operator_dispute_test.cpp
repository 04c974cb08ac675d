// Disputes settled by one operator (docs/dispute.md) on real zoo models and requestors' scripted
// modules (wav2vec 2.0, a VAE): providers that change
// one operator of a step are located at that operator, and the referee and the numpy referee
// both rule against them; an honest provider's every call is ruled for it. The same through the
// commands and a provider's service: operator_dispute_commands_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "common/file_io.h"
#include "dispute/evidence_values.h"
#include "dispute/recompute.h"
#include "protocol/keys.h"
#include "tests/adversary/dispute_fixtures.h"
#include "tests/adversary/operator_cheater.h"
#include "tests/cli/python_made.h"
#include "tests/test_util.h"
#include "training/trainer.h"
#include "verifier/audit/operator_audit.h"

namespace vt::adversary {
namespace {

Bytes start_state(const Task& task, const training::TrainerOptions& options = {}) {
  auto trainer = training::Trainer::create(task, options);
  EXPECT_TRUE(trainer.ok()) << trainer.error().message;
  auto state = (*trainer)->snapshot();
  EXPECT_TRUE(state.ok()) << state.error().message;
  return *state;
}

const SigningKey& key(int which) {
  static const SigningKey provider = *SigningKey::generate(), auditor = *SigningKey::generate();
  return which == 0 ? provider : auditor;
}

struct Case {
  OperatorCheat cheat;
  bool cnn;
  bool recipes = false;  // dispute_fixtures.h's with_recipes
  // A requestor's TorchScript module of tests/cli/real_models.py in place of a zoo model.
  const char* scripted = nullptr;
};

// The portable task `task init` writes for a module of tests/cli/real_models.py, in the folder
// those are made in (the task's paths are relative to it); nullopt when Debian's torch, -vision,
// -audio or sklearn is missing.
std::optional<std::pair<Task, std::filesystem::path>> scripted_task(const std::string& model) {
  static std::string made;
  static const std::unique_ptr<testing::ScratchDir> dir =
      testing::copy_of_made("real_models.py", {"make_digits.py", "requestor_nets.py"},
                            "torch, torchvision, torchaudio, sklearn", made);
  EXPECT_EQ(made, "");
  if (dir == nullptr) return std::nullopt;
  const std::string data = model == "wav2vec2" ? "waves" : "rows";
  auto init = testing::run_command(
      "cd '" + dir->path().string() + "' && " + testing::veritrain_binary() +
          " task init --model torchscript --model-file " + model +
          ".pt --dataset tensors --data-file " + data +
          ".safetensors --epochs 1 --steps-per-epoch 2 --batch-size 4 --determinism portable" +
          (model == "vae" ? " --loss model" : "") + " --out cheat-" + model + ".json",
      dir->path());
  EXPECT_EQ(init.exit_code, 0) << init.err;
  auto task = load_task(dir->path() / ("cheat-" + model + ".json"));
  EXPECT_TRUE(task.ok()) << (task.ok() ? "" : task.error().message);
  if (!task.ok()) return std::nullopt;
  return std::make_pair(*task, dir->path());
}

class Cheats : public ::testing::TestWithParam<Case> {};

TEST_P(Cheats, AreLocatedAtTheirOperatorAndRuledAgainst) {
  const Case c = GetParam();
  const Task plain = c.cnn ? small_cnn() : small_gpt();
  Task task = c.recipes ? with_recipes(plain) : plain;
  training::TrainerOptions options;
  if (c.scripted != nullptr) {
    auto scripted = scripted_task(c.scripted);
    if (!scripted) GTEST_SKIP() << "Debian's python3-torch, -torchvision, -torchaudio or -sklearn";
    task = scripted->first;
    options.task_dir = scripted->second;
  }
  const std::string optimizer_op = c.cnn ? "sgd_update" : "adam_update";
  const std::string expected_op = cheated_operator(c.cheat, optimizer_op);
  const Bytes start = start_state(task, options);

  // The provider's step as it computed it, and the auditor's replay of the same step.
  OperatorCheater cheat(c.cheat, optimizer_op);
  auto provider = verifier::trace_step(task, start, 1, 1, options, std::nullopt, &cheat);
  ASSERT_TRUE(provider.ok()) << provider.error().message;
  ASSERT_GT(cheat.changed(), 0) << "the cheat made no difference to " << expected_op;
  auto auditor = verifier::trace_step(task, start, 1, 1, options);
  ASSERT_TRUE(auditor.ok()) << auditor.error().message;

  auto signed_trace = dispute::read_signed_trace(
      dispute::write_signed_trace(provider->trace, key(0)), "provider trace");
  ASSERT_TRUE(signed_trace.ok()) << signed_trace.error().message;
  const auto departure = dispute::first_departure(auditor->trace, signed_trace->trace);
  ASSERT_TRUE(departure.has_value());
  EXPECT_EQ(departure->kind, dispute::Departure::Kind::kOperator) << departure->description;
  EXPECT_EQ(provider->trace.calls[static_cast<std::size_t>(departure->call)].op, expected_op);
  // The auditor's dispute compares as it replays and stops at that call: its trace is the
  // replay's up to and including it, the same on every run.
  auto compared = verifier::compare_step(task, start, *signed_trace, options);
  ASSERT_TRUE(compared.ok()) << compared.error().message;
  ASSERT_TRUE(compared->departure.has_value());
  EXPECT_EQ(compared->departure->call, departure->call);
  EXPECT_EQ(compared->departure->kind, departure->kind);
  const std::vector<dispute::TracedCall> prefix(auditor->trace.calls.begin(),
                                                auditor->trace.calls.begin() + departure->call + 1);
  EXPECT_EQ(compared->auditor.calls, prefix);
  EXPECT_EQ(compared->auditor.header.calls, departure->call + 1);
  EXPECT_EQ(compared->auditor.header.calls_root, dispute::calls_root(prefix));

  // The provider's values of that call, answered with its own code.
  OperatorCheater again(c.cheat, optimizer_op);
  auto values = verifier::trace_step(task, start, 1, 1, options, departure->call, &again);
  ASSERT_TRUE(values.ok()) << values.error().message;
  ASSERT_TRUE(values->values.has_value());
  auto evidence =
      verifier::operator_evidence(*signed_trace, *values->values, auditor->trace.header.calls_root);
  ASSERT_TRUE(evidence.ok()) << evidence.error().message;
  // Every one of these operators is refereed on one value: the evidence names it and carries
  // only what it reads.
  ASSERT_TRUE(evidence->disputed.has_value()) << expected_op;
  testing::ScratchDir dir;
  const auto file = dir / "evidence.json";
  ASSERT_TRUE(write_file_atomic(file, dispute::write_operator_evidence(*evidence, key(1))).ok());

  auto checked = dispute::read_operator_evidence(*read_text_file(file), file.string());
  ASSERT_TRUE(checked.ok()) << checked.error().message;
  auto ruling = dispute::rule(checked->evidence);
  ASSERT_TRUE(ruling.ok()) << ruling.error().message;
  EXPECT_FALSE(ruling->provider_correct) << ruling->summary;
  EXPECT_EQ(ruling->op, expected_op);

  const auto cli = testing::run_command(
      testing::veritrain_binary() + " --json referee " + file.string(), dir.path());
  EXPECT_EQ(cli.exit_code, 1) << cli.out << cli.err;
  EXPECT_NE(cli.out.find("\"ruling\":\"provider_wrong\""), std::string::npos) << cli.out;
  // The page an arbiter reads: the ruling, the operator and where its outputs differ.
  const auto page = testing::run_command(testing::veritrain_binary() + " referee " + file.string() +
                                             " --report " + (dir / "ruling").string(),
                                         dir.path());
  EXPECT_EQ(page.exit_code, 1) << page.err;
  const auto html = read_text_file(dir / "ruling" / "report.html");
  ASSERT_TRUE(html.ok()) << page.out << page.err;
  EXPECT_NE(html->find("AGAINST THE PROVIDER"), std::string::npos);
  EXPECT_NE(html->find("<b>" + expected_op + "</b>"), std::string::npos);
  EXPECT_NE(html->find("Where the provider&#39;s outputs differ"), std::string::npos);

  const auto numpy = numpy_referee(file, dir.path());
  EXPECT_EQ(numpy.exit_code, 1) << numpy.out << numpy.err;
  EXPECT_NE(numpy.out.find("\"provider_wrong\""), std::string::npos) << numpy.out << numpy.err;
  EXPECT_NE(numpy.out.find("\"signatures\": \"checked\""), std::string::npos) << numpy.out;
}

INSTANTIATE_TEST_SUITE_P(OperatorDispute, Cheats,
                         ::testing::Values(Case{OperatorCheat::kGeluTanh, false},
                                           Case{OperatorCheat::kSoftmaxWithoutMax, false},
                                           Case{OperatorCheat::kAdamEpsInsideSqrt, false},
                                           Case{OperatorCheat::kSkippedWeightDecay, false},
                                           Case{OperatorCheat::kSkippedWeightDecay, true},
                                           Case{OperatorCheat::kDropoutOtherStream, false},
                                           Case{OperatorCheat::kBatchNormSequential, true},
                                           Case{OperatorCheat::kCorruptedWeight, false},
                                           Case{OperatorCheat::kCorruptedWeight, true},
                                           Case{OperatorCheat::kClippingSkipped, false, true},
                                           Case{OperatorCheat::kAverageSkipped, true, true},
                                           Case{OperatorCheat::kCorruptedWeight, true, true},
                                           Case{OperatorCheat::kGeluTanh, false, false, "wav2vec2"},
                                           Case{OperatorCheat::kNormalOtherStream, false, false,
                                                "vae"}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           if (info.param.scripted != nullptr)
                             return cheat_name(info.param.cheat) + "_" + info.param.scripted;
                           return cheat_name(info.param.cheat) +
                                  (info.param.cnn ? "_cnn" : "_gpt") +
                                  (info.param.recipes ? "_recipes" : "");
                         });

// An honest provider that keeps every call's values (and passes the calls on to the recorder).
class KeepAll : public dispute::ForwardingSink {
 public:
  void begin(std::string_view op, std::span<const kernels::trace::Param> params,
             std::span<const kernels::trace::Operand> inputs) override {
    pending_.emplace(0);
    pending_->begin(op, params, inputs);
    ForwardingSink::begin(op, params, inputs);
  }
  void end(std::span<const kernels::trace::Operand> outputs) override {
    pending_->end(outputs);
    calls.push_back(pending_->calls().front());
    values.push_back(*pending_->captured());
    ForwardingSink::end(outputs);
  }
  std::vector<dispute::TracedCall> calls;
  std::vector<dispute::CallValues> values;

 private:
  std::optional<dispute::TraceRecorder> pending_;
};

// A zoo model, with or without the recipes (the cnn's clipping in the inf norm).
struct HonestCase {
  bool cnn;
  bool recipes;
};

class HonestStep : public ::testing::TestWithParam<HonestCase> {};

// Every call of an honest step is ruled for the provider by the referee; the first call of each
// operator also by the numpy referee; and the trace is the same at another thread count.
TEST_P(HonestStep, IsNeverRuledAgainst) {
  const bool cnn = GetParam().cnn;
  const Task plain = cnn ? small_cnn() : small_gpt();
  const Task task = GetParam().recipes ? with_recipes(plain, cnn) : plain;
  const Bytes start = start_state(task);
  auto one = verifier::trace_step(task, start, 1, 2, {});
  ASSERT_TRUE(one.ok()) << one.error().message;
  training::TrainerOptions three;
  three.intra_op_threads = 3;
  auto other = verifier::trace_step(task, start, 1, 2, three);
  ASSERT_TRUE(other.ok()) << other.error().message;
  EXPECT_FALSE(dispute::first_departure(one->trace, other->trace).has_value());
  EXPECT_EQ(one->trace.header.calls_root, other->trace.header.calls_root);

  KeepAll all;  // sees steps 1 and 2: the last calls are the traced step's
  auto traced = verifier::trace_step(task, start, 1, 2, {}, std::nullopt, &all);
  ASSERT_TRUE(traced.ok()) << traced.error().message;
  const std::size_t n = traced->trace.calls.size();
  ASSERT_GE(all.calls.size(), n);
  const std::size_t first = all.calls.size() - n;
  auto signed_trace = dispute::read_signed_trace(dispute::write_signed_trace(traced->trace, key(0)),
                                                 "provider trace");
  ASSERT_TRUE(signed_trace.ok()) << signed_trace.error().message;
  testing::ScratchDir dir;
  std::set<std::string> numpy_checked;
  int one_value_rulings = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const dispute::TracedCall& call = all.calls[first + i];
    ASSERT_EQ(call, traced->trace.calls[i]);
    dispute::CallValues values = all.values[first + i];
    values.index = static_cast<std::int64_t>(i);
    auto evidence =
        verifier::operator_evidence(*signed_trace, values, one->trace.header.calls_root);
    ASSERT_TRUE(evidence.ok()) << evidence.error().message;
    auto ruling = dispute::rule(*evidence);
    ASSERT_TRUE(ruling.ok()) << call.op << ": " << ruling.error().message;
    EXPECT_TRUE(ruling->provider_correct) << ruling->summary;
    const bool first_of_op = numpy_checked.insert(call.op).second;
    // Evidence for one value at the start, middle and end of each output: the values outside
    // what dispute/cone.h says it reads are NaN, so a cone that missed one would not give the
    // provider's value back.
    for (std::size_t o = 0; o < call.outputs.size(); ++o) {
      const std::int64_t count = call.outputs[o].count;
      for (const std::int64_t at : {std::int64_t{0}, count / 2, count - 1}) {
        if (count == 0) continue;
        auto one = dispute::one_value_evidence(*evidence, o, at);
        if (!one) continue;
        ++one_value_rulings;
        auto read = dispute::read_operator_evidence(dispute::write_operator_evidence(*one, key(1)),
                                                    "one value");
        ASSERT_TRUE(read.ok()) << call.op << ": " << read.error().message;
        auto on_one = dispute::rule(read->evidence);
        ASSERT_TRUE(on_one.ok()) << call.op << " " << call.outputs[o].name << "[" << at
                                 << "]: " << on_one.error().message;
        EXPECT_TRUE(on_one->provider_correct)
            << call.op << " " << call.outputs[o].name << "[" << at << "]: " << on_one->summary;
        if (first_of_op && at == count - 1) {
          const auto file = dir / ("call-" + std::to_string(i) + "-" + std::to_string(o) + ".json");
          ASSERT_TRUE(write_file_atomic(file, dispute::write_operator_evidence(*one, key(1))).ok());
          const auto numpy = numpy_referee(file, dir.path());
          EXPECT_EQ(numpy.exit_code, 0) << call.op << ": " << numpy.out << numpy.err;
        }
      }
    }
    if (!first_of_op) continue;
    const auto file = dir / ("call-" + std::to_string(i) + ".json");
    ASSERT_TRUE(write_file_atomic(file, dispute::write_operator_evidence(*evidence, key(1))).ok());
    const auto numpy = numpy_referee(file, dir.path());
    EXPECT_EQ(numpy.exit_code, 0) << call.op << ": " << numpy.out << numpy.err;
  }
  EXPECT_GE(numpy_checked.size(), cnn ? 10u : 12u);
  EXPECT_GE(one_value_rulings, cnn ? 60 : 150);
  if (GetParam().recipes) {
    for (const char* op : {cnn ? "abs_max" : "sum_of_squares", "clip_coefficient", "scale_gradient",
                           "cross_entropy_smoothed", "ema_update"})
      EXPECT_TRUE(numpy_checked.count(op)) << op << " is not in the step's trace";
  }
}

// Activation checkpointing is the provider's choice: its recomputed forward is not in the trace,
// so a checkpointing provider's step trace is its auditor's, call for call.
TEST(OperatorDispute, ACheckpointedStepHasThePlainStepsTrace) {
  Task task = small_gpt();
  task.model.options["layers"] = 2;
  const Bytes start = start_state(task);
  auto plain = verifier::trace_step(task, start, 1, 2, {});
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  training::TrainerOptions checkpointed;
  checkpointed.checkpoint_activations = true;
  auto other = verifier::trace_step(task, start, 1, 2, checkpointed);
  ASSERT_TRUE(other.ok()) << other.error().message;
  EXPECT_FALSE(dispute::first_departure(plain->trace, other->trace).has_value());
  EXPECT_EQ(plain->trace.header.calls_root, other->trace.header.calls_root);
  EXPECT_EQ(plain->trace.calls.size(), other->trace.calls.size());
}

INSTANTIATE_TEST_SUITE_P(OperatorDispute, HonestStep,
                         ::testing::Values(HonestCase{false, false}, HonestCase{true, false},
                                           HonestCase{false, true}, HonestCase{true, true}),
                         [](const ::testing::TestParamInfo<HonestCase>& info) {
                           return std::string(info.param.cnn ? "cnn" : "gpt") +
                                  (info.param.recipes ? "_recipes" : "");
                         });

// With gradient groups a step runs its groups one after another in one process (their sum a
// fixed tree of LibTorch additions, untraced): the trace is that sequence, the same at any thread
// count, and a cheat in the second group is located there and ruled against.
TEST(OperatorDispute, GradientGroupsTraceAsOneSequence) {
  Task task = small_gpt();
  task.gradient_groups = 2;
  const Bytes start = start_state(task);
  auto honest = verifier::trace_step(task, start, 1, 1, {});
  ASSERT_TRUE(honest.ok()) << honest.error().message;
  training::TrainerOptions three;
  three.intra_op_threads = 3;
  auto other = verifier::trace_step(task, start, 1, 1, three);
  ASSERT_TRUE(other.ok()) << other.error().message;
  EXPECT_EQ(honest->trace.header.calls_root, other->trace.header.calls_root);
  std::vector<std::int64_t> gelus;
  for (std::size_t i = 0; i < honest->trace.calls.size(); ++i)
    if (honest->trace.calls[i].op == "gelu") gelus.push_back(static_cast<std::int64_t>(i));
  ASSERT_EQ(gelus.size(), 2u);  // one layer's MLP, once in each group's forward

  // A provider whose GELU is the tanh form in the second group (the cheater changes the first
  // gelu it sees; the first group's calls pass it by).
  class SecondGroupCheater : public OperatorCheater {
   public:
    using OperatorCheater::OperatorCheater;
    void begin(std::string_view op, std::span<const kernels::trace::Param> params,
               std::span<const kernels::trace::Operand> inputs) override {
      if (op == "gelu") ++gelus_;
      cheating_ = gelus_ >= 2;  // calls strictly alternate begin, end: one flag serves
      if (cheating_) return OperatorCheater::begin(op, params, inputs);
      // Past the cheater, on purpose: the first group's calls reach the recorder unchanged.
      ForwardingSink::begin(op, params, inputs);  // NOLINT(bugprone-parent-virtual-call)
    }
    void end(std::span<const kernels::trace::Operand> outputs) override {
      if (cheating_) return OperatorCheater::end(outputs);
      ForwardingSink::end(outputs);  // NOLINT(bugprone-parent-virtual-call)
    }

   private:
    int gelus_ = 0;
    bool cheating_ = false;
  };
  SecondGroupCheater cheat(OperatorCheat::kGeluTanh);
  auto provider = verifier::trace_step(task, start, 1, 1, {}, std::nullopt, &cheat);
  ASSERT_TRUE(provider.ok()) << provider.error().message;
  const auto departure = dispute::first_departure(honest->trace, provider->trace);
  ASSERT_TRUE(departure.has_value());
  EXPECT_EQ(departure->kind, dispute::Departure::Kind::kOperator) << departure->description;
  EXPECT_EQ(departure->call, gelus[1]);
  SecondGroupCheater again(OperatorCheat::kGeluTanh);
  auto values = verifier::trace_step(task, start, 1, 1, {}, departure->call, &again);
  ASSERT_TRUE(values.ok()) << values.error().message;
  auto signed_trace = dispute::read_signed_trace(
      dispute::write_signed_trace(provider->trace, key(0)), "provider trace");
  ASSERT_TRUE(signed_trace.ok()) << signed_trace.error().message;
  auto evidence =
      verifier::operator_evidence(*signed_trace, *values->values, honest->trace.header.calls_root);
  ASSERT_TRUE(evidence.ok()) << evidence.error().message;
  auto ruling = dispute::rule(*evidence);
  ASSERT_TRUE(ruling.ok()) << ruling.error().message;
  EXPECT_FALSE(ruling->provider_correct) << ruling->summary;
}

// A provider that signs a trace with one output hash changed cannot back it with values: the
// values it computed do not hash to what it signed.
TEST(OperatorDispute, AForgedHashIsCaughtByTheValues) {
  const Task task = small_gpt();
  const Bytes start = start_state(task);
  auto honest = verifier::trace_step(task, start, 1, 1, {});
  ASSERT_TRUE(honest.ok()) << honest.error().message;
  dispute::StepTrace forged = honest->trace;
  const std::size_t at = 5;
  forged.calls[at].outputs[0].root[0] ^= 1;
  forged.header.calls_root = dispute::calls_root(forged.calls);
  auto signed_trace =
      dispute::read_signed_trace(dispute::write_signed_trace(forged, key(0)), "forged");
  ASSERT_TRUE(signed_trace.ok()) << signed_trace.error().message;
  const auto departure = dispute::first_departure(honest->trace, signed_trace->trace);
  ASSERT_TRUE(departure.has_value());
  EXPECT_EQ(departure->call, static_cast<std::int64_t>(at));
  auto values = verifier::trace_step(task, start, 1, 1, {}, departure->call);
  ASSERT_TRUE(values.ok()) << values.error().message;
  auto evidence =
      verifier::operator_evidence(*signed_trace, *values->values, honest->trace.header.calls_root);
  ASSERT_FALSE(evidence.ok());
  EXPECT_EQ(evidence.error().code, Errc::kRejected);
  EXPECT_NE(evidence.error().message.find("not the ones the signed trace hashes"),
            std::string::npos)
      << evidence.error().message;
}

// A trace ends its epoch after the traced step: that trainer holds no epoch boundary, so it
// neither snapshots nor trains on.
TEST(OperatorDispute, ATrainerStoppedAfterAStepHoldsNoEpochBoundary) {
  auto trainer = training::Trainer::create(small_gpt());
  ASSERT_TRUE(trainer.ok()) << trainer.error().message;
  training::EpochHooks hooks;
  hooks.on_step_end = [](std::int64_t) { return false; };
  auto one = (*trainer)->train_epoch(hooks);
  ASSERT_TRUE(one.ok()) << one.error().message;
  EXPECT_EQ(one->steps, 1);
  EXPECT_EQ((*trainer)->epoch(), 0);
  auto snapshot = (*trainer)->snapshot();
  ASSERT_FALSE(snapshot.ok());
  EXPECT_NE(snapshot.error().message.find("no epoch boundary"), std::string::npos);
  auto again = (*trainer)->train_epoch();
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("no epoch boundary"), std::string::npos);
}

TEST(OperatorDispute, RefusesTasksItDoesNotTrace) {
  Task task = small_gpt();
  task.determinism = Determinism::kExact;
  auto traced = verifier::trace_step(task, {}, 1, 1, {});
  ASSERT_FALSE(traced.ok());
  EXPECT_NE(traced.error().message.find("portable tasks"), std::string::npos);
  task = small_gpt();
  const Bytes start = start_state(task);
  auto late = verifier::trace_step(task, start, 1, 3, {});
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.error().message.find("--step 3: an epoch has steps 1..2"), std::string::npos)
      << late.error().message;
  auto wrong_epoch = verifier::trace_step(task, start, 2, 1, {});
  ASSERT_FALSE(wrong_epoch.ok());
  EXPECT_NE(wrong_epoch.error().message.find("starts from epoch 1"), std::string::npos)
      << wrong_epoch.error().message;
}

}  // namespace
}  // namespace vt::adversary

// Disputes settled by one operator (docs/dispute.md) on real zoo models: providers that change
// one operator of a step are located at that operator, and the referee and the numpy referee
// both rule against them; an honest provider's every call is ruled for it.
#include <gtest/gtest.h>

#include <set>

#include "common/file_io.h"
#include "common/json.h"
#include "dispute/recompute.h"
#include "protocol/keys.h"
#include "tests/adversary/operator_cheater.h"
#include "tests/test_util.h"
#include "training/trainer.h"
#include "training/zoo.h"
#include "verifier/audit/operator_audit.h"

namespace vt::adversary {
namespace {

Task small_gpt() {
  Task t = *training::default_task("gpt", "synthetic");
  t.model.options = {
      {"vocab", 16},    {"d_model", 16},          {"layers", 1}, {"heads", 2}, {"seq_len", 8},
      {"mlp_ratio", 2}, {"dropout_permille", 100}};
  t.dataset.options = {{"samples", 32}};
  t.optimizer.weight_decay = 0.01;
  t.epochs = 1;
  t.steps_per_epoch = 2;
  t.batch_size = 4;
  t.determinism = Determinism::kPortable;
  return t;
}

Task small_cnn() {
  Task t = *training::default_task("cnn", "synthetic");
  t.model.options = {{"width", 4}, {"blocks", 1}, {"classes", 10}};
  t.dataset.options = {{"samples", 16}};
  t.epochs = 1;
  t.steps_per_epoch = 2;
  t.batch_size = 4;
  t.determinism = Determinism::kPortable;
  return t;
}

Bytes start_state(const Task& task) {
  auto trainer = training::Trainer::create(task);
  EXPECT_TRUE(trainer.ok()) << trainer.error().message;
  auto state = (*trainer)->snapshot();
  EXPECT_TRUE(state.ok()) << state.error().message;
  return *state;
}

const SigningKey& key(int which) {
  static const SigningKey provider = *SigningKey::generate(), auditor = *SigningKey::generate();
  return which == 0 ? provider : auditor;
}

testing::CommandResult numpy_referee(const std::filesystem::path& evidence,
                                     const std::filesystem::path& scratch) {
  return testing::run_command("/usr/bin/python3 " + std::string(VT_SOURCE_DIR) +
                                  "/scripts/referee_ref.py " + evidence.string(),
                              scratch);
}

struct Case {
  OperatorCheat cheat;
  bool cnn;
};

class Cheats : public ::testing::TestWithParam<Case> {};

TEST_P(Cheats, AreLocatedAtTheirOperatorAndRuledAgainst) {
  const Case c = GetParam();
  const Task task = c.cnn ? small_cnn() : small_gpt();
  const std::string optimizer_op = c.cnn ? "sgd_update" : "adam_update";
  const std::string expected_op = cheated_operator(c.cheat, optimizer_op);
  const Bytes start = start_state(task);

  // The provider's step as it computed it, and the auditor's replay of the same step.
  OperatorCheater cheat(c.cheat, optimizer_op);
  auto provider = verifier::trace_step(task, start, 1, 1, {}, std::nullopt, &cheat);
  ASSERT_TRUE(provider.ok()) << provider.error().message;
  ASSERT_GT(cheat.changed(), 0) << "the cheat made no difference to " << expected_op;
  auto auditor = verifier::trace_step(task, start, 1, 1, {});
  ASSERT_TRUE(auditor.ok()) << auditor.error().message;

  auto signed_trace = dispute::read_signed_trace(
      dispute::write_signed_trace(provider->trace, key(0)), "provider trace");
  ASSERT_TRUE(signed_trace.ok()) << signed_trace.error().message;
  const auto departure = dispute::first_departure(auditor->trace, signed_trace->trace);
  ASSERT_TRUE(departure.has_value());
  EXPECT_EQ(departure->kind, dispute::Departure::Kind::kOperator) << departure->description;
  EXPECT_EQ(provider->trace.calls[static_cast<std::size_t>(departure->call)].op, expected_op);

  // The provider's values of that call, answered with its own code.
  OperatorCheater again(c.cheat, optimizer_op);
  auto values = verifier::trace_step(task, start, 1, 1, {}, departure->call, &again);
  ASSERT_TRUE(values.ok()) << values.error().message;
  ASSERT_TRUE(values->values.has_value());
  auto evidence =
      verifier::operator_evidence(*signed_trace, *values->values, auditor->trace.header.calls_root);
  ASSERT_TRUE(evidence.ok()) << evidence.error().message;
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
                                           Case{OperatorCheat::kCorruptedWeight, true}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return cheat_name(info.param.cheat) + (info.param.cnn ? "_cnn" : "_gpt");
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

class HonestStep : public ::testing::TestWithParam<bool> {};

// Every call of an honest step is ruled for the provider by the referee; the first call of each
// operator also by the numpy referee; and the trace is the same at another thread count.
TEST_P(HonestStep, IsNeverRuledAgainst) {
  const Task task = GetParam() ? small_cnn() : small_gpt();
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
    if (!numpy_checked.insert(call.op).second) continue;
    const auto file = dir / ("call-" + std::to_string(i) + ".json");
    ASSERT_TRUE(write_file_atomic(file, dispute::write_operator_evidence(*evidence, key(1))).ok());
    const auto numpy = numpy_referee(file, dir.path());
    EXPECT_EQ(numpy.exit_code, 0) << call.op << ": " << numpy.out << numpy.err;
  }
  EXPECT_GE(numpy_checked.size(), GetParam() ? 10u : 12u);
}

INSTANTIATE_TEST_SUITE_P(OperatorDispute, HonestStep, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "cnn" : "gpt");
                         });

// A provider that signs a trace with one output hash changed cannot back it with values: the
// values it computed do not hash to what it signed.
TEST(OperatorDispute, AForgedHashIsCaughtByTheValues) {
  const Task task = small_gpt();
  const Bytes start = start_state(task);
  auto honest = verifier::trace_step(task, start, 1, 1, {});
  ASSERT_TRUE(honest.ok()) << honest.error().message;
  dispute::StepTrace forged = honest->trace;
  const std::size_t at = 5;
  forged.calls[at].outputs[0].sha256[0] ^= 1;
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

// The commands as a provider and an auditor run them on a workdir: the provider's trace agrees
// with the replay; a trace the provider re-signed with one hash changed is located at that call,
// and the provider's values then fail against what it signed.
TEST(OperatorDispute, CommandsTraceDisputeAndReferee) {
  testing::ScratchDir dir;
  Task task = small_gpt();
  task.epochs = 2;
  ASSERT_TRUE(write_file_atomic(dir / "task.json", canonical_task_json(task)).ok());
  const std::string v = testing::veritrain_binary();
  const std::string common =
      " --task " + (dir / "task.json").string() + " --workdir " + (dir / "w").string();
  auto run = [&](const std::string& args) {
    return testing::run_command(v + " --json " + args, dir.path());
  };
  auto trained = run("train" + common);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const std::string trace = (dir / "trace.json").string();
  auto traced = run("trace" + common + " --epoch 2 --step 2 --out " + trace);
  ASSERT_EQ(traced.exit_code, 0) << traced.err;
  auto agrees = run("dispute" + common + " --provider-trace " + trace);
  EXPECT_EQ(agrees.exit_code, 0) << agrees.out << agrees.err;
  EXPECT_NE(agrees.out.find("\"result\":\"agrees\""), std::string::npos) << agrees.out;

  // The provider re-signs its trace with one output hash changed.
  auto read = dispute::read_signed_trace(*read_text_file(trace), trace);
  ASSERT_TRUE(read.ok()) << read.error().message;
  dispute::StepTrace forged = read->trace;
  forged.calls[7].outputs[0].sha256[3] ^= 0x10;
  forged.header.calls_root = dispute::calls_root(forged.calls);
  auto provider_key = SigningKey::load(KeyFiles::in(dir / "w" / "keys").signing_key);
  ASSERT_TRUE(provider_key.ok()) << provider_key.error().message;
  const std::string forged_file = (dir / "forged.json").string();
  ASSERT_TRUE(
      write_file_atomic(forged_file, dispute::write_signed_trace(forged, *provider_key)).ok());
  auto located = run("dispute" + common + " --provider-trace " + forged_file);
  EXPECT_EQ(located.exit_code, 1) << located.out << located.err;
  EXPECT_NE(located.out.find("\"call\":7"), std::string::npos) << located.out;
  EXPECT_NE(located.out.find("\"result\":\"operator\""), std::string::npos) << located.out;
  const std::string values = (dir / "values.json").string();
  auto answered = run("trace" + common + " --epoch 2 --step 2 --call 7 --out " + values);
  ASSERT_EQ(answered.exit_code, 0) << answered.err;
  auto caught = run("dispute" + common + " --provider-trace " + forged_file +
                    " --provider-values " + values + " --evidence " + (dir / "e.json").string());
  EXPECT_EQ(caught.exit_code, 1) << caught.out << caught.err;
  EXPECT_NE(caught.err.find("not the ones the signed trace hashes"), std::string::npos)
      << caught.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "e.json"));

  // Another key's trace answers for nothing in this workdir; a malformed file names itself.
  const SigningKey stranger = *SigningKey::generate();
  ASSERT_TRUE(
      write_file_atomic(forged_file, dispute::write_signed_trace(read->trace, stranger)).ok());
  auto foreign = run("dispute" + common + " --provider-trace " + forged_file);
  EXPECT_EQ(foreign.exit_code, 1) << foreign.err;
  EXPECT_NE(foreign.err.find("not by the key that signed the workdir's commitments"),
            std::string::npos)
      << foreign.err;
  ASSERT_TRUE(write_file_atomic(forged_file, std::string("{\"header\": 3}")).ok());
  auto malformed = run("referee " + forged_file);
  EXPECT_EQ(malformed.exit_code, 2) << malformed.err;
  EXPECT_NE(malformed.err.find("no ruling: " + forged_file), std::string::npos) << malformed.err;
}

}  // namespace
}  // namespace vt::adversary

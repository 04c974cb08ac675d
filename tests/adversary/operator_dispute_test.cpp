// Disputes settled by one operator (docs/dispute.md) on real zoo models: providers that change
// one operator of a step are located at that operator, and the referee and the numpy referee
// both rule against them; an honest provider's every call is ruled for it.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "common/file_io.h"
#include "common/json.h"
#include "dispute/evidence_values.h"
#include "dispute/recompute.h"
#include "protocol/keys.h"
#include "protocol/net/server.h"
#include "provider/workdir_catalog.h"
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
  // The auditor's dispute compares as it replays and stops at that call: its trace is the
  // replay's up to and including it, the same on every run.
  auto compared = verifier::compare_step(task, start, *signed_trace, {});
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
  auto values = verifier::trace_step(task, start, 1, 1, {}, departure->call, &again);
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
  EXPECT_GE(numpy_checked.size(), GetParam() ? 10u : 12u);
  EXPECT_GE(one_value_rulings, GetParam() ? 60 : 150);
}

INSTANTIATE_TEST_SUITE_P(OperatorDispute, HonestStep, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "cnn" : "gpt");
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
  forged.calls[7].outputs[0].root[3] ^= 0x10;
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
  EXPECT_NE(foreign.err.find("not by the key that signed the provider's commitments"),
            std::string::npos)
      << foreign.err;
  ASSERT_TRUE(write_file_atomic(forged_file, std::string("{\"header\": 3}")).ok());
  auto unreadable = run("dispute" + common + " --provider-trace " + forged_file);
  EXPECT_EQ(unreadable.exit_code, 1) << unreadable.err;  // the provider's fault, not a usage error
  EXPECT_NE(unreadable.err.find("the provider's answer is malformed"), std::string::npos)
      << unreadable.err;
  auto malformed = run("referee " + forged_file);
  EXPECT_EQ(malformed.exit_code, 2) << malformed.err;
  EXPECT_NE(malformed.err.find("no ruling: " + forged_file), std::string::npos) << malformed.err;
}

// A provider's service that answers trace requests with a cheater's traces: its GELU is the tanh
// form. Everything else is the workdir's, served as `serve` serves it. It may fail to answer for
// its traces, or for the values of a call, as a provider hiding its arithmetic would.
enum class Answers { kAll, kNoTraces, kNoValues, kNextStep };
class CheatingCatalog : public Catalog {
 public:
  CheatingCatalog(std::shared_ptr<Catalog> inner, Task task, SigningKey key,
                  Answers answers = Answers::kAll)
      : inner_(std::move(inner)), task_(std::move(task)), key_(std::move(key)), answers_(answers) {}
  Result<Bytes> task() override { return inner_->task(); }
  Result<std::vector<SignedRecord>> log_records(std::uint64_t from) override {
    return inner_->log_records(from);
  }
  Result<std::shared_ptr<const Bytes>> canonical_snapshot(std::uint64_t epoch) override {
    return inner_->canonical_snapshot(epoch);
  }
  Result<std::shared_ptr<const Bytes>> container(const ContainerRequest& request) override {
    return inner_->container(request);
  }
  Result<std::shared_ptr<const Bytes>> step_trace(const TraceRequest& r) override {
    if (answers_ == Answers::kNoTraces || (answers_ == Answers::kNoValues && r.call))
      return io_error("the replay ran out of memory");
    VT_ASSIGN_OR_RETURN(auto start, inner_->canonical_snapshot(r.epoch - 1));
    OperatorCheater cheat(OperatorCheat::kGeluTanh);
    std::optional<std::int64_t> call;
    if (r.call) call = static_cast<std::int64_t>(*r.call);
    const auto step = static_cast<std::int64_t>(r.step) + (answers_ == Answers::kNextStep ? 1 : 0);
    VT_ASSIGN_OR_RETURN(verifier::TracedStep traced,
                        verifier::trace_step(task_, *start, r.epoch, step, {}, call, &cheat));
    const std::string text = traced.values
                                 ? dispute::write_call_values(traced.trace.header, *traced.values)
                                 : dispute::write_signed_trace(traced.trace, key_);
    return std::make_shared<const Bytes>(text.begin(), text.end());
  }

 private:
  std::shared_ptr<Catalog> inner_;
  Task task_;
  SigningKey key_;
  Answers answers_;
};

// Online: `dispute --provider` asks the service for the provider's traces. An honest `serve`
// answers with veritrain-torch's trace (it agrees with the replay); a provider whose GELU is the
// tanh form is located at its gelu, its values fetched, the evidence written and ruled on.
TEST(OperatorDispute, OnlineAgainstTheProvidersService) {
  testing::ScratchDir dir;
  Task task = small_gpt();
  task.epochs = 2;
  ASSERT_TRUE(write_file_atomic(dir / "task.json", canonical_task_json(task)).ok());
  const std::string v = testing::veritrain_binary();
  const std::string workdir = (dir / "w").string();
  auto run = [&](const std::string& args) {
    return testing::run_command(v + " --json " + args, dir.path());
  };
  ASSERT_EQ(run("train --task " + (dir / "task.json").string() + " --workdir " + workdir).exit_code,
            0);
  const std::string token = (dir / "token").string();
  ASSERT_TRUE(
      write_file_atomic(token, std::string("0123456789abcdef0123456789abcdef\n"), 0600).ok());
  const std::uint16_t port = testing::free_port();
  testing::Background serve(
      {v, "serve", "--workdir", workdir, "--listen", "127.0.0.1:" + std::to_string(port),
       "--insecure", "--token-file", token},
      dir / "serve.log");
  const std::string online = "dispute --task " + (dir / "task.json").string() +
                             " --provider 127.0.0.1:" + std::to_string(port) +
                             " --insecure --token-file " + token + " --epoch 2";
  testing::CommandResult honest;
  for (int attempt = 0; attempt < 100; ++attempt) {  // until serve listens
    honest = run(online + " --step 2");
    if (honest.err.find("connect") == std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(honest.exit_code, 0) << honest.out << honest.err;
  EXPECT_NE(honest.out.find("\"result\":\"agrees\""), std::string::npos) << honest.out;
  auto whole = run(online);  // no --step: the audit finds nothing to dispute
  EXPECT_EQ(whole.exit_code, 0) << whole.out << whole.err;
  EXPECT_NE(whole.out.find("\"result\":\"no_step_dispute\""), std::string::npos) << whole.out;

  // The cheater's service, in this process.
  auto inner = provider::open_workdir_catalog(workdir);
  ASSERT_TRUE(inner.ok()) << inner.error().message;
  auto key = SigningKey::load(KeyFiles::in(dir / "w" / "keys").signing_key);
  ASSERT_TRUE(key.ok());
  ServerConfig config;
  config.insecure = true;
  config.token = "0123456789abcdef0123456789abcdef";
  auto server = Server::start(std::move(config),
                              std::make_shared<CheatingCatalog>(*inner, task, std::move(*key)));
  ASSERT_TRUE(server.ok()) << server.error().message;
  const std::string evidence = (dir / "evidence.json").string();
  auto against = run("dispute --task " + (dir / "task.json").string() + " --provider 127.0.0.1:" +
                     std::to_string((*server)->endpoint().port) + " --insecure --token-file " +
                     token + " --epoch 2 --step 1 --evidence " + evidence + " --key " +
                     (dir / "auditor").string() + " --report " + (dir / "ruling").string());
  EXPECT_EQ(against.exit_code, 1) << against.out << against.err;
  EXPECT_NE(against.out.find("\"operator\":\"gelu\""), std::string::npos) << against.out;
  EXPECT_NE(against.out.find("\"ruling\":\"provider_wrong\""), std::string::npos) << against.out;
  auto ruled = run("referee " + evidence);
  EXPECT_EQ(ruled.exit_code, 1) << ruled.out << ruled.err;
  EXPECT_TRUE(std::filesystem::exists(dir / "ruling" / "report.html"));
  const auto numpy = numpy_referee(evidence, dir.path());
  EXPECT_EQ(numpy.exit_code, 1) << numpy.out << numpy.err;

  // The evidence carries the provider's commitments of epochs 1 and 2, signed by the key that
  // signed the trace; one of them edited (and the evidence re-signed) gives no ruling.
  auto doc = parse_json(*read_text_file(evidence), "evidence");
  ASSERT_TRUE(doc.ok());
  ASSERT_EQ((*doc)["evidence"]["records"].size(), 2u);
  std::string line = (*doc)["evidence"]["records"][1];
  const std::size_t root = line.find("\"root\":\"") + 8;
  line[root] = line[root] == 'a' ? 'b' : 'a';
  (*doc)["evidence"]["records"][1] = line;
  const SigningKey auditor = *SigningKey::generate();
  (*doc)["signature"] = hex_encode(auditor.sign(as_bytes(canonical_json((*doc)["evidence"]))));
  (*doc)["signer"] = hex_encode(auditor.public_key().raw());
  ASSERT_TRUE(write_file_atomic(evidence, canonical_json(*doc)).ok());
  auto edited = run("referee " + evidence);
  EXPECT_EQ(edited.exit_code, 2) << edited.out << edited.err;
  EXPECT_NE(edited.err.find("records[1]"), std::string::npos) << edited.err;

  // A provider that fails to answer for its trace, or for the values of the call its own trace
  // puts in dispute, until --evidence-timeout has passed, or answers for another step: a
  // rejection naming the step, not an error of the auditor's.
  for (const Answers answers : {Answers::kNoTraces, Answers::kNoValues, Answers::kNextStep}) {
    ServerConfig quiet;
    quiet.insecure = true;
    quiet.token = "0123456789abcdef0123456789abcdef";
    auto again = provider::open_workdir_catalog(workdir);
    ASSERT_TRUE(again.ok()) << again.error().message;
    auto refusing = Server::start(
        std::move(quiet),
        std::make_shared<CheatingCatalog>(
            *again, task, *SigningKey::load(KeyFiles::in(dir / "w" / "keys").signing_key),
            answers));
    ASSERT_TRUE(refusing.ok()) << refusing.error().message;
    auto refused = run("dispute --task " + (dir / "task.json").string() + " --provider 127.0.0.1:" +
                       std::to_string((*refusing)->endpoint().port) + " --insecure --token-file " +
                       token + " --epoch 2 --step 1 --evidence-timeout 1");
    EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
    EXPECT_NE(refused.out.find("\"result\":\"withheld\""), std::string::npos) << refused.out;
    EXPECT_NE(refused.out.find("\"step\":1"), std::string::npos) << refused.out;
    const std::string withheld =
        answers == Answers::kNoTraces   ? "the trace of step 1 of epoch 2 is withheld"
        : answers == Answers::kNoValues ? "the answer for call "
                                        : "answered with its trace of step 2 of epoch 2";
    EXPECT_NE(refused.out.find(withheld), std::string::npos) << refused.out;
    if (answers == Answers::kNoValues) {
      EXPECT_NE(refused.out.find("\"operator\":\"gelu\""), std::string::npos) << refused.out;
    }
  }
}

}  // namespace
}  // namespace vt::adversary

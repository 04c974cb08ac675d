// Disputes settled by one operator, through the commands (docs/dispute.md): `trace`, `dispute`
// and `referee` on a provider's workdir, and `dispute --provider` against a provider's service,
// honest or answering with a cheater's traces.
#include <gtest/gtest.h>

#include <thread>

#include "common/file_io.h"
#include "common/json.h"
#include "dispute/evidence_values.h"
#include "protocol/keys.h"
#include "protocol/net/server.h"
#include "provider/workdir_catalog.h"
#include "tests/adversary/dispute_fixtures.h"
#include "tests/adversary/operator_cheater.h"
#include "tests/test_util.h"
#include "verifier/audit/operator_audit.h"

namespace vt::adversary {
namespace {

// Each test: a two-epoch small gpt in task.json of a scratch folder, and `veritrain --json ARGS`
// run there.
class OperatorDisputeCommands : public ::testing::Test {
 protected:
  OperatorDisputeCommands() {
    task.epochs = 2;
    EXPECT_TRUE(write_file_atomic(dir / "task.json", canonical_task_json(task)).ok());
  }
  testing::CommandResult run(const std::string& args) const {
    return testing::run_command(testing::veritrain_binary() + " --json " + args, dir.path());
  }

  testing::ScratchDir dir;
  Task task = small_gpt();
};

// The commands as a provider and an auditor run them on a workdir: the provider's trace agrees
// with the replay; a trace the provider re-signed with one hash changed is located at that call,
// and the provider's values then fail against what it signed.
TEST_F(OperatorDisputeCommands, TraceDisputeAndReferee) {
  const std::string common =
      " --task " + (dir / "task.json").string() + " --workdir " + (dir / "w").string();
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
TEST_F(OperatorDisputeCommands, OnlineAgainstTheProvidersService) {
  const std::string v = testing::veritrain_binary();
  const std::string workdir = (dir / "w").string();
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

  // The cheater's service, in this process: the workdir served with the cheater's traces, signed
  // with the provider's key.
  auto cheating_service = [&](Answers answers) -> Result<std::unique_ptr<Server>> {
    VT_ASSIGN_OR_RETURN(auto inner, provider::open_workdir_catalog(workdir));
    VT_ASSIGN_OR_RETURN(SigningKey key,
                        SigningKey::load(KeyFiles::in(dir / "w" / "keys").signing_key));
    ServerConfig config;
    config.insecure = true;
    config.token = "0123456789abcdef0123456789abcdef";
    return Server::start(std::move(config), std::make_shared<CheatingCatalog>(
                                                std::move(inner), task, std::move(key), answers));
  };
  auto server = cheating_service(Answers::kAll);
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
  // rejection naming the step, not an error of the auditor's. The timeout also bounds every
  // fetch before it (the log first): 1 s was too short for that under the sanitizers beside
  // other work (`make sanitize`, 2026-11-28), so 5 s, which the two withheld cases wait out.
  for (const Answers answers : {Answers::kNoTraces, Answers::kNoValues, Answers::kNextStep}) {
    auto refusing = cheating_service(answers);
    ASSERT_TRUE(refusing.ok()) << refusing.error().message;
    auto refused = run("dispute --task " + (dir / "task.json").string() + " --provider 127.0.0.1:" +
                       std::to_string((*refusing)->endpoint().port) + " --insecure --token-file " +
                       token + " --epoch 2 --step 1 --evidence-timeout 5");
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

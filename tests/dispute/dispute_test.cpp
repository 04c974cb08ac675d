#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <regex>
#include <set>
#include <sstream>

#include "common/file_io.h"
#include "common/json.h"
#include "dispute/recompute.h"
#include "dispute/referee.h"
#include "tests/dispute/capture_all.h"
#include "tests/dispute/kernel_calls.h"
#include "tests/test_util.h"

namespace vt::dispute {
namespace {

using testing::ramp;
using testing::run_kernels;

using testing::CaptureAll;

// Every way of hashing gives each operand its own root: repeats known by value, kept copies
// taken when added (the caller may overwrite its buffer at once), with or without the helper
// thread, and past the memo's budget.
TEST(OperandDigests, EachTicketIsItsBytesRoot) {
  std::vector<Bytes> operands;
  for (std::size_t n : {0, 1, 7, 4096, 100000}) {
    Bytes b(n);
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(i * 31 + n);
    operands.push_back(b);
    operands.push_back(b);  // a repeat
    if (n > 0) {
      b[n / 2] ^= 1;  // the same length and key-sized prefix, one bit apart
      operands.push_back(b);
    }
  }
  for (const bool background : {false, true}) {
    for (const std::size_t memo : {std::size_t{0}, std::size_t{5000}, std::size_t{1} << 30}) {
      OperandDigests digests(memo, background);
      std::vector<OperandDigests::Ticket> tickets;
      for (const Bytes& b : operands) {
        Bytes scratch = b;
        tickets.push_back(digests.add(scratch));
        std::fill(scratch.begin(), scratch.end(), std::uint8_t{0xee});  // overwritten at once
      }
      digests.finish();
      for (std::size_t i = 0; i < operands.size(); ++i)
        EXPECT_EQ(digests.digest(tickets[i]), operand_root(operands[i]))
            << "operand " << i << ", memo " << memo << ", background " << background;
      const std::size_t total =
          std::accumulate(operands.begin(), operands.end(), std::size_t{0},
                          [](std::size_t sum, const Bytes& b) { return sum + b.size(); });
      EXPECT_EQ(digests.hashed_bytes() + digests.repeated_bytes(), total);
      if (memo > total) {
        EXPECT_EQ(digests.repeated_bytes(), 1 + 7 + 4096 + 100000);
      } else if (memo == 0) {
        EXPECT_EQ(digests.repeated_bytes(), 0u);
      }
    }
  }
}

TEST(StepTrace, RecordsNothingWithoutASink) {
  TraceRecorder recorder;
  run_kernels();  // not installed
  EXPECT_TRUE(recorder.calls().empty());
  EXPECT_FALSE(kernels::trace::active());
}

TEST(StepTrace, RecordsOuterCallsOnlyInOrder) {
  TraceRecorder recorder;
  {
    ScopedSink on(&recorder);
    run_kernels();
  }
  std::vector<std::string> ops;
  for (const TracedCall& c : recorder.calls()) ops.push_back(c.op);
  // The grouped convolution's own products are part of its call, not calls of their own.
  EXPECT_EQ(ops, (std::vector<std::string>{"gemm",
                                           "gemm",
                                           "add_bias",
                                           "gelu",
                                           "gelu_backward",
                                           "softmax",
                                           "softmax_backward",
                                           "layer_norm",
                                           "cross_entropy",
                                           "cross_entropy_backward",
                                           "embedding",
                                           "dropout",
                                           "batch_norm_train",
                                           "conv",
                                           "conv_backward",
                                           "adam_update",
                                           "log_softmax",
                                           "log_softmax_backward",
                                           "relu",
                                           "relu_backward",
                                           "row_mean",
                                           "row_mean_backward",
                                           "mse",
                                           "mse_backward",
                                           "column_sums",
                                           "dropout_backward",
                                           "embedding_backward",
                                           "layer_norm",
                                           "layer_norm_backward",
                                           "batch_norm_train",
                                           "batch_norm_backward",
                                           "conv",
                                           "conv_backward",
                                           "sgd_update",
                                           "sgd_update",
                                           "sigmoid",
                                           "sigmoid_backward",
                                           "hardtanh",
                                           "hardtanh_backward",
                                           "softplus",
                                           "softplus_backward",
                                           "max_pool2d",
                                           "max_pool2d_backward",
                                           "avg_pool2d",
                                           "avg_pool2d_backward",
                                           "adaptive_avg_pool2d",
                                           "adaptive_avg_pool2d_backward",
                                           "adaptive_max_pool2d",
                                           "upsample_bilinear2d",
                                           "upsample_bilinear2d_backward",
                                           "upsample_nearest",
                                           "upsample_nearest_backward",
                                           "group_norm",
                                           "group_norm_backward",
                                           "group_norm",
                                           "baddbmm",
                                           "baddbmm",
                                           "baddbmm_backward",
                                           "rnn",
                                           "rnn_backward",
                                           "rnn",
                                           "rnn_backward",
                                           "rnn",
                                           "rnn_backward",
                                           "rnn",
                                           "rnn_backward",
                                           "randint",
                                           "randint",
                                           "rnn",
                                           "rnn_backward",
                                           "nll_loss",
                                           "nll_loss_backward",
                                           "cross_entropy_smoothed",
                                           "cross_entropy_smoothed_backward",
                                           "bce_with_logits",
                                           "bce_with_logits_backward",
                                           "reduce",
                                           "reduce_backward",
                                           "reduce",
                                           "reduce_backward",
                                           "reduce",
                                           "reduce_backward",
                                           "reduce",
                                           "reduce_backward",
                                           "feature_dropout",
                                           "feature_dropout_backward",
                                           "bernoulli",
                                           "batch_norm_eval"}));
  // An absent operand is recorded as such; an in-place update has its inputs before the call.
  const TracedCall& ln = recorder.calls()[7];
  EXPECT_EQ(ln.inputs[2].name, "bias");
  EXPECT_EQ(ln.inputs[2].count, 0);
  const TracedCall& adam = recorder.calls()[15];
  EXPECT_NE(adam.inputs[0].root, adam.outputs[0].root);
}

TEST(StepTrace, EveryRecordedCallRecomputesToItsOwnOutputs) {
  CaptureAll all;
  {
    ScopedSink on(&all);
    run_kernels();
  }
  ASSERT_EQ(all.calls.size(), 88u);
  for (std::size_t i = 0; i < all.calls.size(); ++i) {
    SCOPED_TRACE(all.calls[i].op);
    auto out = recompute(all.calls[i], all.values[i].inputs);
    ASSERT_TRUE(out.ok()) << out.error().message;
    ASSERT_EQ(out->size(), all.values[i].outputs.size());
    for (std::size_t o = 0; o < out->size(); ++o)
      EXPECT_EQ((*out)[o].bytes, all.values[i].outputs[o].bytes) << (*out)[o].name;
    EXPECT_TRUE(check_values(*out, all.calls[i].outputs, "recomputed").ok());
  }
}

TEST(StepTrace, ProofsReachTheRootAndOnlyFromTheirOwnCall) {
  TraceRecorder recorder;
  {
    ScopedSink on(&recorder);
    run_kernels();
  }
  const auto& calls = recorder.calls();
  const Digest root = calls_root(calls);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const CallProof proof = prove_call(calls, static_cast<std::int64_t>(i));
    EXPECT_TRUE(verify_call(root, calls[i], proof)) << i;
    EXPECT_FALSE(verify_call(root, calls[(i + 1) % calls.size()], proof)) << i;
    CallProof moved = proof;
    moved.index = static_cast<std::int64_t>((i + 1) % calls.size());
    EXPECT_FALSE(verify_call(root, calls[i], moved)) << i;
  }
}

struct Signed {
  std::shared_ptr<const SigningKey> provider =
      std::make_shared<const SigningKey>(*SigningKey::generate());
  StepTrace trace;
  std::vector<CallValues> values;
  std::string text;
};

Signed signed_trace() {
  Signed s;
  CaptureAll all;
  {
    ScopedSink on(&all);
    run_kernels();
  }
  s.trace.calls = all.calls;
  s.values = all.values;
  s.trace.header = {sha256(std::string_view("task")), 3, 2,
                    static_cast<std::int64_t>(all.calls.size()), calls_root(all.calls)};
  s.text = write_signed_trace(s.trace, *s.provider);
  return s;
}

TEST(SignedTrace, ReadsBackAndRefusesEdits) {
  const Signed s = signed_trace();
  auto read = read_signed_trace(s.text, "trace.json");
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->trace.calls, s.trace.calls);
  EXPECT_EQ(read->signer.raw(), s.provider->public_key().raw());

  // One output hash changed: the calls no longer hash to the signed root.
  auto doc = *parse_json(s.text, "t");
  std::string h = doc["calls"][3]["outputs"][0]["root"];
  h[0] = h[0] == 'a' ? 'b' : 'a';
  doc["calls"][3]["outputs"][0]["root"] = h;
  auto edited = read_signed_trace(canonical_json(doc), "trace.json");
  ASSERT_FALSE(edited.ok());
  EXPECT_EQ(edited.error().code, Errc::kRejected);
  EXPECT_NE(edited.error().message.find("do not hash to the signed calls_root"), std::string::npos);

  // The header changed: the signature fails.
  doc = *parse_json(s.text, "t");
  doc["header"]["step"] = 3;
  auto resigned = read_signed_trace(canonical_json(doc), "trace.json");
  ASSERT_FALSE(resigned.ok());
  EXPECT_NE(resigned.error().message.find("signature"), std::string::npos);

  // Malformed: a call out of order, a bad dtype: invalid input naming the place.
  doc = *parse_json(s.text, "t");
  doc["calls"][2]["index"] = 5;
  auto reordered = read_signed_trace(canonical_json(doc), "trace.json");
  ASSERT_FALSE(reordered.ok());
  EXPECT_NE(reordered.error().message.find("trace.json: calls[2]: index"), std::string::npos);
  doc = *parse_json(s.text, "t");
  doc["calls"][1]["inputs"][0]["dtype"] = "f16";
  auto dtype = read_signed_trace(canonical_json(doc), "trace.json");
  ASSERT_FALSE(dtype.ok());
  EXPECT_EQ(dtype.error().code, Errc::kInvalidInput);
}

OperatorEvidence evidence_for(const Signed& s, std::size_t call) {
  OperatorEvidence e;
  e.header = s.trace.header;
  e.provider = s.provider->public_key();
  e.provider_signature = s.provider->sign(as_bytes(canonical_json(header_to_json(e.header))));
  e.call = s.trace.calls[call];
  e.proof = prove_call(s.trace.calls, static_cast<std::int64_t>(call));
  e.inputs = s.values[call].inputs;
  e.outputs = s.values[call].outputs;
  e.place = "forward pass";
  return e;
}

TEST(Referee, RulesForAnHonestCallAndAgainstAChangedOne) {
  const Signed s = signed_trace();
  const SigningKey auditor = *SigningKey::generate();
  for (std::size_t i = 0; i < s.trace.calls.size(); ++i) {
    auto checked =
        read_operator_evidence(write_operator_evidence(evidence_for(s, i), auditor), "e");
    ASSERT_TRUE(checked.ok()) << checked.error().message;
    auto ruling = rule(checked->evidence);
    ASSERT_TRUE(ruling.ok()) << ruling.error().message;
    EXPECT_TRUE(ruling->provider_correct) << s.trace.calls[i].op << ": " << ruling->summary;
  }

  // A provider whose gelu output is one ulp off in one value, and which signed that output.
  Signed cheat = s;
  CallValues& gelu = cheat.values[3];
  ASSERT_EQ(cheat.trace.calls[3].op, "gelu");
  float* y = reinterpret_cast<float*>(gelu.outputs[0].bytes.data());
  y[7] = std::nextafter(y[7], INFINITY);
  cheat.trace.calls[3].outputs[0].root = operand_root(gelu.outputs[0].bytes);
  cheat.trace.header.calls_root = calls_root(cheat.trace.calls);
  auto checked =
      read_operator_evidence(write_operator_evidence(evidence_for(cheat, 3), auditor), "e");
  ASSERT_TRUE(checked.ok()) << checked.error().message;
  auto ruling = rule(checked->evidence);
  ASSERT_TRUE(ruling.ok());
  EXPECT_FALSE(ruling->provider_correct);
  EXPECT_EQ(ruling->differing_outputs, std::vector<std::string>{"y (1 of 30 values)"});
  ASSERT_EQ(ruling->examples.size(), 1u);
  EXPECT_EQ(ruling->examples[0].output, "y");
  EXPECT_EQ(ruling->examples[0].index, 7);
  EXPECT_EQ(static_cast<float>(ruling->examples[0].provider),
            std::nextafter(static_cast<float>(ruling->examples[0].documented), INFINITY));
  EXPECT_NE(ruling->summary.find("against the provider"), std::string::npos);
}

TEST(Referee, RefusesEvidenceThatDoesNotHold) {
  const Signed s = signed_trace();
  const SigningKey auditor = *SigningKey::generate();
  const std::string good = write_operator_evidence(evidence_for(s, 3), auditor);
  // The document is canonical JSON, as every signed document of ours.
  EXPECT_EQ(good, canonical_json(nlohmann::json::parse(good)) + "\n");
  auto expect_refused = [&](nlohmann::json doc, const SigningKey* resign, const std::string& says) {
    if (resign != nullptr) {
      doc["signature"] = hex_encode(resign->sign(as_bytes(canonical_json(doc["evidence"]))));
      doc["signer"] = hex_encode(resign->public_key().raw());
    }
    auto r = read_operator_evidence(canonical_json(doc), "evidence.json");
    ASSERT_FALSE(r.ok()) << says;
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  };
  const auto doc = *parse_json(good, "e");
  // Edited after the auditor signed.
  auto edited = doc;
  edited["evidence"]["place"] = "elsewhere";
  expect_refused(edited, nullptr, "auditor's signature");
  // Values that are not the ones the provider's trace hashes (re-signed by the auditor).
  auto values = doc;
  std::string text = values["evidence"]["inputs"][0]["base64"];
  text[0] = text[0] == 'A' ? 'B' : 'A';
  values["evidence"]["inputs"][0]["base64"] = text;
  expect_refused(values, &auditor, "not the ones the signed trace hashes");
  // A call that is not in the provider's signed trace.
  auto moved = doc;
  moved["evidence"]["call"]["params"][0]["int"] = 31;
  expect_refused(moved, &auditor, "is not in the provider's signed trace");
  // A header the provider did not sign.
  auto header = doc;
  header["evidence"]["header"]["epoch"] = 4;
  expect_refused(header, &auditor, "provider's signature");
}

// reference/referee_ref.py, numpy written from docs/portable.md, on every call above: the same
// ruling as the kernels' (for the provider), and against the one-ulp gelu.
TEST(Referee, TheNumpyRefereeRulesAsTheKernelsDo) {
  Signed s = signed_trace();
  const SigningKey auditor = *SigningKey::generate();
  testing::ScratchDir dir;
  auto numpy = [&](const std::vector<std::size_t>& calls) {
    std::string files;
    for (const std::size_t i : calls) {
      const auto file = dir / ("evidence-" + std::to_string(i) + ".json");
      EXPECT_TRUE(
          write_file_atomic(file, write_operator_evidence(evidence_for(s, i), auditor)).ok());
      files += ' ';
      files += file.string();
    }
    return testing::run_command(
        "/usr/bin/python3 " + std::string(VT_SOURCE_DIR) + "/reference/referee_ref.py" + files,
        dir.path());
  };
  // Every call in one run of the script (a ruling a line); grouped convolutions are not covered.
  std::vector<std::size_t> covered, grouped;
  for (std::size_t i = 0; i < s.trace.calls.size(); ++i) {
    const TracedCall& call = s.trace.calls[i];
    bool is_grouped = false;
    for (const TracedParam& p : call.params)
      is_grouped |= call.op.starts_with("conv") && p.name == "groups" && p.integer != 1;
    (is_grouped ? grouped : covered).push_back(i);
  }
  const auto all = numpy(covered);
  EXPECT_EQ(all.exit_code, 0) << all.out << all.err;
  std::istringstream lines(all.out);
  std::size_t n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    ASSERT_LT(n, covered.size());
    const TracedCall& call = s.trace.calls[covered[n]];
    std::string ruled = R"("ruling": "provider_correct", "operator": ")";
    ruled += call.op;
    EXPECT_NE(line.find(ruled + '"'), std::string::npos) << covered[n] << ": " << line;
  }
  EXPECT_EQ(n, covered.size()) << all.err;
  ASSERT_FALSE(grouped.empty());
  const auto not_covered = numpy(grouped);
  EXPECT_EQ(not_covered.exit_code, 3) << not_covered.out << not_covered.err;

  float* y = reinterpret_cast<float*>(s.values[3].outputs[0].bytes.data());
  y[7] = std::nextafter(y[7], INFINITY);
  s.trace.calls[3].outputs[0].root = operand_root(s.values[3].outputs[0].bytes);
  s.trace.header.calls_root = calls_root(s.trace.calls);
  const auto r = numpy({3});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("\"differing_outputs\": [\"y (1 of 30 values)\"]"), std::string::npos)
      << r.out;
}

// docs/dispute.md's table of recorded operators is the referee's list.
TEST(Referee, TheDocsListTheOperatorsItRecomputes) {
  const std::string doc = *read_text_file(std::string(VT_SOURCE_DIR) + "/docs/dispute.md");
  const std::size_t begin = doc.find("### Recorded operators");
  ASSERT_NE(begin, std::string::npos);
  const std::string table = doc.substr(begin, doc.find("\n### ", begin + 1) - begin);
  std::set<std::string> documented;
  const std::regex row("\n\\| `([a-z0-9_]+)` \\|");
  for (auto it = std::sregex_iterator(table.begin(), table.end(), row);
       it != std::sregex_iterator(); ++it)
    documented.insert((*it)[1]);
  const auto& names = refereed_operators();
  EXPECT_EQ(documented, std::set<std::string>(names.begin(), names.end()));
}

TEST(Recompute, RefusesOperandsThatDoNotFitTheParameters) {
  const Signed s = signed_trace();
  // gemm with k larger than its operands hold.
  TracedCall gemm = s.trace.calls[0];
  for (TracedParam& p : gemm.params)
    if (p.name == "k") p.integer = 9;
  auto r = recompute(gemm, s.values[0].inputs);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kInvalidInput);
  EXPECT_NE(r.error().message.find("input a holds 48 values; the parameters call for 54"),
            std::string::npos)
      << r.error().message;
  // Sizes whose product would overflow before any allocation.
  for (TracedParam& p : gemm.params)
    if (p.name == "m" || p.name == "n" || p.name == "k") p.integer = std::int64_t{1} << 20;
  r = recompute(gemm, s.values[0].inputs);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("more than 2^28"), std::string::npos) << r.error().message;
  // An id outside the table.
  TracedCall emb = s.trace.calls[10];
  ASSERT_EQ(emb.op, "embedding");
  std::vector<OperandValues> inputs = s.values[10].inputs;
  reinterpret_cast<std::int64_t*>(inputs[0].bytes.data())[1] = 99;
  r = recompute(emb, inputs);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("ids[1] = 99 is outside [0, 4)"), std::string::npos)
      << r.error().message;
  // A reduction whose sizes claim more values than its input holds: refused before the shape's
  // tables of offsets are built; a max pool's argmax outside its plane; a target out of range.
  std::size_t first_reduce = 0, first_pool_backward = 0, first_nll = 0;
  for (std::size_t i = s.trace.calls.size(); i-- > 0;) {
    if (s.trace.calls[i].op == "reduce") first_reduce = i;
    if (s.trace.calls[i].op == "max_pool2d_backward") first_pool_backward = i;
    if (s.trace.calls[i].op == "nll_loss") first_nll = i;
  }
  TracedCall reduce = s.trace.calls[first_reduce];
  for (TracedParam& p : reduce.params)
    if (p.name == "size_0") p.integer = std::int64_t{1} << 20;
  r = recompute(reduce, s.values[first_reduce].inputs);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("input x holds 24 values; the parameters call for"),
            std::string::npos)
      << r.error().message;
  inputs = s.values[first_pool_backward].inputs;
  reinterpret_cast<std::int64_t*>(inputs[0].bytes.data())[2] = 20;  // the plane holds 5 × 4
  r = recompute(s.trace.calls[first_pool_backward], inputs);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("argmax[2] = 20 is outside [-1, 20)"), std::string::npos)
      << r.error().message;
  inputs = s.values[first_nll].inputs;
  reinterpret_cast<std::int64_t*>(inputs[1].bytes.data())[0] = 5;
  r = recompute(s.trace.calls[first_nll], inputs);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("targets[0] = 5 is outside [0, 5)"), std::string::npos)
      << r.error().message;
  // An operator the referee does not know.
  TracedCall other = gemm;
  other.op = "fft";
  r = recompute(other, s.values[0].inputs);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("does not recompute it"), std::string::npos);
}

TEST(Departure, FindsTheFirstCallWithSameInputsAndOtherOutputs) {
  const Signed s = signed_trace();
  StepTrace provider = s.trace;
  EXPECT_FALSE(first_departure(s.trace, provider).has_value());
  provider.calls[5].outputs[0].root[0] ^= 1;
  provider.calls[6].inputs[0].root[0] ^= 1;  // what follows from it differs too
  auto d = first_departure(s.trace, provider);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, Departure::Kind::kOperator);
  EXPECT_EQ(d->call, 5);

  provider = s.trace;
  provider.calls[4].inputs[1].root[0] ^= 1;
  d = first_departure(s.trace, provider);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, Departure::Kind::kUntraced);
  EXPECT_EQ(d->call, 4);

  provider = s.trace;
  provider.calls[2].params[0].integer += 1;
  EXPECT_EQ(first_departure(s.trace, provider)->kind, Departure::Kind::kStructure);
  provider = s.trace;
  provider.calls.pop_back();
  EXPECT_EQ(first_departure(s.trace, provider)->kind, Departure::Kind::kLength);
}

// Compared with the provider's calls as it records, a recorder keeps the calls up to the first
// that parts and stops there: the next call's begin throws StepCut (the kernels' caller ends),
// and from then on kernels neither call it nor prepare operands for it.
TEST(Departure, ARecorderComparingAsItGoesStopsAtTheFirstCallThatParts) {
  TraceRecorder honest;
  {
    ScopedSink on(&honest);
    run_kernels();
  }
  const std::vector<TracedCall> all = honest.calls();
  ASSERT_GT(all.size(), 8u);
  for (const bool background : {false, true}) {
    std::vector<TracedCall> provider = all;
    provider[5].outputs[0].root[0] ^= 1;
    TraceRecorder recorder(std::nullopt, background);
    recorder.compare_with(&provider);
    bool cut = false;
    {
      ScopedSink on(&recorder);
      try {
        run_kernels();
      } catch (const StepCut&) {
        cut = true;
      }
      EXPECT_EQ(cut, recorder.parted().has_value());
      EXPECT_EQ(kernels::trace::active(), !cut);
      // Every digest is ready at once without the helper: the next call's begin sees it.
      if (!background) {
        EXPECT_TRUE(cut);
      }
    }
    const std::vector<TracedCall>& kept = recorder.calls();
    if (recorder.parted()) {
      EXPECT_EQ(*recorder.parted(), 5u);
      EXPECT_EQ(kept, std::vector<TracedCall>(all.begin(), all.begin() + 6));
    } else {  // the helper had not hashed call 5 before the kernels ended: all of them
      EXPECT_EQ(kept, all);
    }
    StepTrace mine, theirs;
    mine.calls = kept;
    theirs.calls = provider;
    const auto d = first_departure(mine, theirs);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->call, 5);
    EXPECT_EQ(d->kind, Departure::Kind::kOperator);
  }

  // Agreeing calls and a shorter provider trace: nothing to stop at, every call recorded.
  std::vector<TracedCall> shorter(all.begin(), all.begin() + 3);
  TraceRecorder recorder;
  recorder.compare_with(&shorter);
  {
    ScopedSink on(&recorder);
    run_kernels();
  }
  EXPECT_FALSE(recorder.parted().has_value());
  EXPECT_EQ(recorder.calls(), all);
}

}  // namespace
}  // namespace vt::dispute

// Operator evidence for one disputed value (docs/dispute.md, "Evidence for one value"): operands
// committed as Merkle trees over 1 KiB chunks, evidence that gives only the chunks one value is
// computed from, and a referee that rules on that value and refuses evidence that leaves out
// any value it reads.
#include <gtest/gtest.h>

#include <cmath>

#include "common/file_io.h"
#include "common/json.h"
#include "common/sha256.h"
#include "dispute/evidence_values.h"
#include "dispute/referee.h"
#include "fingerprint/merkle.h"
#include "kernels/gemm.h"
#include "kernels/norm.h"
#include "kernels/pointwise.h"
#include "tests/dispute/capture_all.h"
#include "tests/dispute/kernel_calls.h"
#include "tests/test_util.h"

namespace vt::dispute {
namespace {

using testing::ramp;

using testing::CaptureAll;

// Calls whose operands span many chunks: a gelu over 1000 values, a product whose b has 59
// chunks (a column of it reads one value from each of 50), a batch norm of 3 channels.
void run_large_calls() {
  const auto x = ramp(1000, 2.0f, 0.1f);
  std::vector<float> y(x.size());
  kernels::gelu(1000, x.data(), y.data());
  const auto a = ramp({3, 50}, 1.0f, 0.2f), b = ramp({50, 300}, 1.0f, 0.9f);
  std::vector<float> c(std::size_t{3} * 300);
  kernels::gemm(1, 3, 300, 50, {a.data(), 50, 1, nullptr}, 150, {b.data(), 300, 1, nullptr}, 15000,
                c.data(), 300, 900, false);
  const kernels::BatchNormShape s{4, 3, 100};
  const auto bx = ramp({4, 3, 100}, 1.5f, 0.4f), w = ramp(3, 1.0f, 2.0f), bias = ramp(3, 0.5f);
  std::vector<float> by(bx.size()), mean(3), invstd(3), rm(3, 0.0f), rv(3, 1.0f);
  kernels::batch_norm_train(s, bx.data(), w.data(), bias.data(), 1e-5f, 0.1f, rm.data(), rv.data(),
                            by.data(), mean.data(), invstd.data());
}

struct LargeTrace {
  std::vector<TracedCall> calls;
  std::vector<CallValues> values;
  TraceHeader header;
  SigningKey provider = *SigningKey::generate();
  void sign() {
    header = {sha256(std::string_view("task")), 1, 1, static_cast<std::int64_t>(calls.size()),
              calls_root(calls)};
  }
  OperatorEvidence whole(std::size_t call) const {
    OperatorEvidence e;
    e.header = header;
    e.provider = provider.public_key();
    e.provider_signature = provider.sign(as_bytes(canonical_json(header_to_json(header))));
    e.call = calls[call];
    e.proof = prove_call(calls, static_cast<std::int64_t>(call));
    e.inputs = values[call].inputs;
    e.outputs = values[call].outputs;
    return e;
  }
};

LargeTrace honest() {
  CaptureAll all;
  {
    ScopedSink on(&all);
    run_large_calls();
  }
  LargeTrace s;
  s.calls = all.calls;
  s.values = all.values;
  s.sign();
  return s;
}

const SigningKey& auditor_key() {
  static const SigningKey key = *SigningKey::generate();
  return key;
}

Result<Ruling> through_the_file(const OperatorEvidence& e) {
  VT_ASSIGN_OR_RETURN(CheckedEvidence read,
                      read_operator_evidence(write_operator_evidence(e, auditor_key()), "e.json"));
  return rule(read.evidence);
}

TEST(OneValue, AnOperandsRootIsTheMerkleTreeOfItsKilobyteChunks) {
  Bytes bytes(2049);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 7);
  const auto leaf = [&](std::size_t begin, std::size_t size) {
    return fp::merkle_leaf_hash(ByteSpan(bytes).subspan(begin, size));
  };
  // Three leaves: RFC 6962 splits at two.
  EXPECT_EQ(
      operand_root(bytes),
      fp::merkle_node_hash(fp::merkle_node_hash(leaf(0, 1024), leaf(1024, 1024)), leaf(2048, 1)));
  EXPECT_EQ(operand_root(ByteSpan(bytes).first(1024)), leaf(0, 1024));
  EXPECT_EQ(operand_root(ByteSpan()), sha256(ByteSpan()));
}

// An honest provider is ruled for on every value tried, from evidence that gives only what the
// value reads; the evidence is a small part of the whole call's.
TEST(OneValue, AnHonestValueIsRuledForFromItsChunksAlone) {
  const LargeTrace s = honest();
  ASSERT_EQ(s.calls.size(), 3u);
  for (std::size_t i = 0; i < s.calls.size(); ++i) {
    const OperatorEvidence whole = s.whole(i);
    const std::size_t whole_size = write_operator_evidence(whole, auditor_key()).size();
    for (std::size_t o = 0; o < s.calls[i].outputs.size(); ++o) {
      const std::int64_t count = s.calls[i].outputs[o].count;
      for (const std::int64_t at : {std::int64_t{0}, count / 3, count - 1}) {
        auto one = one_value_evidence(whole, o, at);
        ASSERT_TRUE(one.has_value()) << s.calls[i].op;
        auto ruling = through_the_file(*one);
        ASSERT_TRUE(ruling.ok()) << s.calls[i].op << ": " << ruling.error().message;
        EXPECT_TRUE(ruling->provider_correct) << ruling->summary;
        EXPECT_NE(ruling->summary.find(s.calls[i].outputs[o].name + "[" + std::to_string(at) + "]"),
                  std::string::npos)
            << ruling->summary;
        // A product's column reads a value in each of 50 chunks of b: b is given whole then,
        // and the evidence is never larger than the whole call's.
        const std::size_t size = write_operator_evidence(*one, auditor_key()).size();
        EXPECT_LE(size, whole_size) << s.calls[i].op;
        if (s.calls[i].op == "gelu" || s.calls[i].outputs[o].name == "y") {
          EXPECT_LT(size, whole_size / 2) << s.calls[i].op << " " << s.calls[i].outputs[o].name;
        }
      }
    }
  }
}

// One value one ulp off: the auditor's evidence names it, gives its chunks, and both referees
// rule against the provider.
TEST(OneValue, AChangedValueIsNarrowedToAndRuledAgainst) {
  for (const std::size_t call : {0, 1, 2}) {
    LargeTrace s = honest();
    auto* y = reinterpret_cast<float*>(s.values[call].outputs[0].bytes.data());
    y[700] = std::nextafter(y[700], INFINITY);
    s.calls[call].outputs[0].root = operand_root(s.values[call].outputs[0].bytes);
    s.sign();
    const auto narrowed = narrow_to_one_value(s.whole(call));
    ASSERT_TRUE(narrowed.has_value()) << s.calls[call].op;
    ASSERT_TRUE(narrowed->disputed.has_value());
    EXPECT_EQ(narrowed->disputed->output, s.calls[call].outputs[0].name);
    EXPECT_EQ(narrowed->disputed->index, 700);
    auto ruling = through_the_file(*narrowed);
    ASSERT_TRUE(ruling.ok()) << ruling.error().message;
    EXPECT_FALSE(ruling->provider_correct) << ruling->summary;
    ASSERT_EQ(ruling->examples.size(), 1u);
    EXPECT_EQ(ruling->examples[0].index, 700);

    testing::ScratchDir dir;
    const auto file = dir / "evidence.json";
    ASSERT_TRUE(write_file_atomic(file, write_operator_evidence(*narrowed, auditor_key())).ok());
    const auto numpy = testing::run_command("/usr/bin/python3 " + std::string(VT_SOURCE_DIR) +
                                                "/reference/referee_ref.py " + file.string(),
                                            dir.path());
    EXPECT_EQ(numpy.exit_code, 1) << numpy.out << numpy.err;
    EXPECT_NE(numpy.out.find("[700] (the one value in dispute)"), std::string::npos) << numpy.out;
  }
}

// Evidence that leaves out a value the disputed one reads, gives a chunk the provider did not
// sign, or names no value: no ruling.
TEST(OneValue, RefusesEvidenceThatDoesNotGiveWhatTheValueReads) {
  const LargeTrace s = honest();
  auto one = one_value_evidence(s.whole(1), 0, 450);  // the product: row 1 of a, column 150 of b
  ASSERT_TRUE(one.has_value());
  const auto doc = *parse_json(write_operator_evidence(*one, auditor_key()), "e");
  auto resigned = [&](nlohmann::json d) {
    d["signature"] = hex_encode(auditor_key().sign(as_bytes(canonical_json(d["evidence"]))));
    return canonical_json(d);
  };
  // The column's 50 values lie in 50 chunks of b: b is given whole, the row of a too (one chunk
  // of one). Cut b down to the chunks by hand to see a missing one refused.
  ASSERT_TRUE(doc["evidence"]["inputs"][1].contains("base64"));
  std::vector<std::uint64_t> column;
  for (std::uint64_t t = 0; t < 50; ++t) column.push_back((t * 300 + 150) * 4 / kOperandChunkBytes);
  OperatorEvidence by_hand = *one;
  by_hand.inputs[1] = s.values[1].inputs[1];
  by_hand.input_chunks[1] = keep_chunks(by_hand.inputs[1], column);
  auto cut = through_the_file(by_hand);
  ASSERT_TRUE(cut.ok()) << cut.error().message;
  EXPECT_TRUE(cut->provider_correct) << cut->summary;
  const auto by_hand_doc = *parse_json(write_operator_evidence(by_hand, auditor_key()), "e");
  auto missing = by_hand_doc;
  ASSERT_EQ(missing["evidence"]["inputs"][1]["chunks"].size(), 50u);
  missing["evidence"]["inputs"][1]["chunks"].erase(20);
  auto read = read_operator_evidence(resigned(missing), "e.json");
  ASSERT_TRUE(read.ok()) << read.error().message;
  auto ruling = rule(read->evidence);
  ASSERT_FALSE(ruling.ok());
  EXPECT_EQ(ruling.error().code, Errc::kInvalidInput);
  EXPECT_NE(ruling.error().message.find("does not give b["), std::string::npos)
      << ruling.error().message;

  auto tampered = by_hand_doc;
  std::string text = tampered["evidence"]["inputs"][1]["chunks"][3]["base64"];
  text[0] = text[0] == 'A' ? 'B' : 'A';
  tampered["evidence"]["inputs"][1]["chunks"][3]["base64"] = text;
  auto forged = read_operator_evidence(resigned(tampered), "e.json");
  ASSERT_FALSE(forged.ok());
  EXPECT_EQ(forged.error().code, Errc::kRejected);
  EXPECT_NE(forged.error().message.find("not part of the values the provider signed"),
            std::string::npos)
      << forged.error().message;

  auto unnamed = doc;
  unnamed["evidence"].erase("disputed");
  auto no_value = read_operator_evidence(resigned(unnamed), "e.json");
  ASSERT_FALSE(no_value.ok());
  EXPECT_NE(no_value.error().message.find("no disputed value is named"), std::string::npos);

  auto elsewhere = doc;
  elsewhere["evidence"]["disputed"]["index"] = 900;
  auto outside = read_operator_evidence(resigned(elsewhere), "e.json");
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.error().message.find("is not a value of output c"), std::string::npos)
      << outside.error().message;

  // A whole operand given where chunks were: still the signed values, still ruled.
  auto whole = by_hand_doc;
  whole["evidence"]["inputs"][1].erase("chunks");
  whole["evidence"]["inputs"][1]["base64"] = base64_encode(s.values[1].inputs[1].bytes);
  auto both = read_operator_evidence(resigned(whole), "e.json");
  ASSERT_TRUE(both.ok()) << both.error().message;
  auto on_whole = rule(both->evidence);
  ASSERT_TRUE(on_whole.ok()) << on_whole.error().message;
  EXPECT_TRUE(on_whole->provider_correct);
}

}  // namespace
}  // namespace vt::dispute

#include "protocol/log.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/file_io.h"
#include "common/sha256.h"
#include "tests/test_util.h"

namespace vt {
namespace {

using nlohmann::json;

const Digest kTask = sha256(std::string_view("task A"));
const Digest kOtherTask = sha256(std::string_view("task B"));

CommitRecord make_record(std::uint64_t epoch) {
  CommitRecord r;
  r.epoch = epoch;
  r.root = sha256("root " + std::to_string(epoch));
  r.data_order_digest = sha256("order " + std::to_string(epoch));
  // Shaped like fingerprint/'s output, but the log must not care what is inside.
  r.fingerprint = json{{"k", 3}, {"values", {0.5, -1.25, 3.0e-7}}};
  r.tracking_fingerprint = json{{"values", {1, 2}}};
  if (epoch > 0) r.trail = {json{{"step", 4}}, json{{"step", 8}}};
  r.metrics = {.loss = 0.125 * static_cast<double>(epoch),
               .steps = 16,
               .seconds = 1.5,
               .samples = 512,
               .eval = std::nullopt};
  r.time = "2025-06-01T12:00:0" + std::to_string(epoch % 10) + ".000Z";
  return r;
}

SigningKey new_key() { return *SigningKey::generate(); }

// A log whose records were each signed correctly, whatever their content: what a dishonest
// provider (who holds the key) could write.
Bytes forge(const std::vector<CommitRecord>& records, const SigningKey& key) {
  Bytes out;
  for (const auto& r : records) append_bytes(out, encode_record(*sign_record(r, key)));
  return out;
}

void write_log(const std::filesystem::path& path, const SigningKey& key, std::uint64_t epochs) {
  auto log = CommitLog::open(path, kTask, LogMode::kAppend);
  ASSERT_TRUE(log.ok()) << log.error().message;
  for (std::uint64_t e = 0; e < epochs; ++e) {
    auto r = log->append(make_record(e), key);
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
}

std::string check_error(ByteSpan bytes, const Digest& task = kTask) {
  auto file = read_log(bytes, "log");
  if (!file.ok()) return file.error().message;
  auto check = verify_log(file->records, task);
  return check.ok() ? std::string("(verified)") : check.error().message;
}

TEST(CommitLog, AppendReopenVerify) {
  testing::ScratchDir dir;
  auto key = new_key();
  write_log(dir / "log", key, 4);
  auto log = CommitLog::open(dir / "log", kTask, LogMode::kReadOnly, key.public_key());
  ASSERT_TRUE(log.ok()) << log.error().message;
  ASSERT_EQ(log->records().size(), 4u);
  EXPECT_EQ(log->next_epoch(), 4u);
  EXPECT_TRUE(log->notice().empty());
  const auto& recs = log->records();
  EXPECT_EQ(recs[0].record.prev, Digest{});
  for (std::size_t e = 1; e < recs.size(); ++e) EXPECT_EQ(recs[e].record.prev, recs[e - 1].hash);
  const CommitRecord& r2 = recs[2].record;
  CommitRecord want = make_record(2);
  EXPECT_EQ(r2.task_id, kTask);
  EXPECT_EQ(r2.root, want.root);
  EXPECT_EQ(r2.data_order_digest, want.data_order_digest);
  EXPECT_EQ(r2.fingerprint, want.fingerprint);
  EXPECT_EQ(r2.tracking_fingerprint, want.tracking_fingerprint);
  EXPECT_EQ(r2.trail, want.trail);
  EXPECT_EQ(r2.metrics.loss, 0.25);
  EXPECT_EQ(r2.metrics.steps, 16u);
  EXPECT_EQ(r2.metrics.seconds, 1.5);
  EXPECT_EQ(r2.metrics.samples, 512u);
  EXPECT_EQ(r2.time, want.time);
  EXPECT_EQ(r2.signer, key.public_key().raw());
  auto check = verify_log(recs, kTask);
  ASSERT_TRUE(check.ok()) << check.error().message;
  EXPECT_EQ(check->records, 4u);
  EXPECT_EQ(check->head, recs[3].hash);
  EXPECT_EQ(check->signer_fingerprint, key.public_key().fingerprint());

  // Reopened for appending, the chain continues where it stopped.
  auto again = CommitLog::open(dir / "log", kTask, LogMode::kAppend);
  ASSERT_TRUE(again.ok());
  auto r4 = again->append(make_record(4), key);
  ASSERT_TRUE(r4.ok()) << r4.error().message;
  EXPECT_EQ(r4->record.prev, recs[3].hash);
  EXPECT_EQ(r4->line, 5u);
  EXPECT_EQ(r4->offset, recs[3].offset + encode_record(recs[3]).size());
  EXPECT_TRUE(CommitLog::open(dir / "log", kTask, LogMode::kReadOnly).ok());
}

// The byte format of docs/log.md, checked without going through our own reader.
TEST(CommitLog, StoredBytesAreBodyTabSignatureNewline) {
  testing::ScratchDir dir;
  auto key = new_key();
  write_log(dir / "log", key, 2);
  Bytes bytes = *read_file(dir / "log");
  std::string text(bytes.begin(), bytes.end());
  auto first_end = text.find('\n');
  ASSERT_NE(first_end, std::string::npos);
  std::string line0 = text.substr(0, first_end + 1);
  std::string line1 = text.substr(first_end + 1);
  auto tab = line0.find('\t');
  std::string body = line0.substr(0, tab);
  std::string sig_hex = line0.substr(tab + 1, line0.size() - tab - 2);
  EXPECT_EQ(sig_hex.size(), 128u);
  EXPECT_TRUE(key.public_key().verify(as_bytes(body), *hex_decode(sig_hex)));
  std::string prev0 = hex_encode(sha256(line0));
  EXPECT_NE(line1.find("\"prev\":\"" + prev0 + "\""), std::string::npos);
  EXPECT_EQ(line1.back(), '\n');
}

TEST(CommitLog, BodyIsGolden) {
  CommitRecord r = make_record(1);
  r.task_id = kTask;
  r.signer = Bytes(32, 0xab);
  auto body = commit_body_json(r);
  ASSERT_TRUE(body.ok()) << body.error().message;
  std::string ab(64, 'a');
  for (std::size_t i = 1; i < ab.size(); i += 2) ab[i] = 'b';
  EXPECT_EQ(
      *body,
      "{\"data_order_digest\":\"" + hex_encode(r.data_order_digest) +
          "\",\"epoch\":1,\"fingerprint\":{\"k\":3,\"values\":[0.5,-1.25,3e-07]},"
          "\"format\":\"veritrain.commit.v1\",\"metrics\":{\"loss\":0.125,\"samples\":512,"
          "\"seconds\":1.5,\"steps\":16},\"prev\":\"" +
          std::string(64, '0') + "\",\"root\":\"" + hex_encode(r.root) + "\",\"signer\":\"" + ab +
          "\",\"task_id\":\"" + hex_encode(kTask) +
          "\",\"time\":\"2025-06-01T12:00:01.000Z\",\"tracking_fingerprint\":{\"values\":[1,2]},"
          "\"trail\":[{\"step\":4},{\"step\":8}]}");
}

TEST(CommitLog, NanLossIsStoredAsNull) {
  auto key = new_key();
  CommitRecord r = make_record(0);
  r.task_id = kTask;
  r.metrics.loss = NAN;
  auto s = sign_record(r, key);
  ASSERT_TRUE(s.ok());
  EXPECT_NE(s->body.find("\"loss\":null"), std::string::npos);
  auto back = decode_record(encode_record(*s));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(std::isnan(back->record.metrics.loss));
}

TEST(CommitLog, FlippingAnyByteIsReportedWithItsEpoch) {
  auto key = new_key();
  std::vector<CommitRecord> recs;
  for (std::uint64_t e = 0; e < 3; ++e) recs.push_back(make_record(e));
  testing::ScratchDir dir;
  write_log(dir / "log", key, 3);
  const Bytes good = *read_file(dir / "log");
  ASSERT_EQ(check_error(good), "(verified)");
  std::vector<std::size_t> line_start{0};
  for (std::size_t i = 0; i + 1 < good.size(); ++i) {
    if (good[i] == '\n') line_start.push_back(i + 1);
  }
  ASSERT_EQ(line_start.size(), 3u);
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::size_t epoch = 0;
    while (epoch + 1 < line_start.size() && line_start[epoch + 1] <= i) ++epoch;
    Bytes bad = good;
    bad[i] ^= 0x01;
    if (i == good.size() - 1) {
      // The last newline gone, the last record reads as an append cut short.
      auto file = read_log(bad, "log");
      ASSERT_TRUE(file.ok());
      ASSERT_TRUE(file->torn_tail.has_value());
      EXPECT_EQ(file->torn_tail->epoch, 2u);
      EXPECT_EQ(file->torn_tail->offset, line_start[2]);
      EXPECT_EQ(file->records.size(), 2u);
      continue;
    }
    std::string where = "log: epoch " + std::to_string(epoch) + " (line " +
                        std::to_string(epoch + 1) + ", offset " +
                        std::to_string(line_start[epoch]) + "): ";
    std::string error = check_error(bad);
    ASSERT_EQ(error.rfind(where, 0), 0u) << "byte " << i << ": " << error;
  }
}

TEST(CommitLog, RecordOfAnotherTaskIsRejected) {
  auto key = new_key();
  std::vector<CommitRecord> recs{make_record(0), make_record(1)};
  recs[0].task_id = recs[1].task_id = kTask;
  auto r0 = *sign_record(recs[0], key);
  recs[1].prev = r0.hash;
  recs[1].task_id = kOtherTask;
  std::string error = check_error(forge(recs, key));
  EXPECT_EQ(error, "log: epoch 1 (line 2, offset " + std::to_string(encode_record(r0).size()) +
                       "): belongs to task " + hex_encode(kOtherTask) + ", not to task " +
                       hex_encode(kTask));
  testing::ScratchDir dir;
  write_log(dir / "log", key, 1);
  auto wrong = CommitLog::open(dir / "log", kOtherTask, LogMode::kAppend);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("epoch 0 (line 1, offset 0): belongs to task"),
            std::string::npos);
  EXPECT_EQ(wrong.error().code, Errc::kRejected);
}

TEST(CommitLog, BrokenChainGapsAndReorderingAreRejected) {
  auto key = new_key();
  std::vector<CommitRecord> recs;
  Digest prev{};
  for (std::uint64_t e = 0; e < 3; ++e) {
    recs.push_back(make_record(e));
    recs.back().task_id = kTask;
    recs.back().prev = prev;
    prev = sign_record(recs.back(), key)->hash;
  }
  ASSERT_EQ(check_error(forge(recs, key)), "(verified)");
  auto bad_prev = recs;
  bad_prev[2].prev = sha256(std::string_view("elsewhere"));
  EXPECT_NE(check_error(forge(bad_prev, key)).find("log: epoch 2 (line 3, offset "),
            std::string::npos);
  EXPECT_NE(check_error(forge(bad_prev, key)).find("(broken chain)"), std::string::npos);
  auto nonzero_start = recs;
  nonzero_start[0].prev = recs[1].prev;
  EXPECT_NE(check_error(forge(nonzero_start, key)).find("epoch 0 must name all zeros"),
            std::string::npos);
  auto gap = std::vector<CommitRecord>{recs[0], recs[2]};
  EXPECT_NE(check_error(forge(gap, key)).find("log: epoch 1 (line 2, offset "), std::string::npos);
  EXPECT_NE(check_error(forge(gap, key)).find("commits epoch 2 where epoch 1 belongs"),
            std::string::npos);
}

TEST(CommitLog, OneSignerThroughout) {
  auto key = new_key();
  auto other = new_key();
  auto r0 = make_record(0);
  r0.task_id = kTask;
  auto s0 = *sign_record(r0, key);
  auto r1 = make_record(1);
  r1.task_id = kTask;
  r1.prev = s0.hash;
  Bytes bytes = encode_record(s0);
  append_bytes(bytes, encode_record(*sign_record(r1, other)));
  std::string error = check_error(bytes);
  EXPECT_NE(error.find("epoch 1 (line 2, offset "), std::string::npos) << error;
  EXPECT_NE(error.find("signed by key " + other.public_key().fingerprint() + ", expected " +
                       key.public_key().fingerprint()),
            std::string::npos)
      << error;
  auto file = read_log(encode_record(s0), "log");
  auto pinned = verify_log(file->records, kTask, other.public_key());
  ASSERT_FALSE(pinned.ok());
  EXPECT_NE(pinned.error().message.find("log: epoch 0 (line 1, offset 0): signed by key"),
            std::string::npos);

  testing::ScratchDir dir;
  write_log(dir / "log", key, 1);
  auto log = CommitLog::open(dir / "log", kTask, LogMode::kAppend);
  ASSERT_TRUE(log.ok());
  auto refused = log->append(make_record(1), other);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("is not the key that signed epoch 0"), std::string::npos);
  EXPECT_EQ(read_file(dir / "log")->size(), encode_record(log->records()[0]).size());
}

TEST(CommitLog, AppendRefusesWrongEpochTaskOrMode) {
  testing::ScratchDir dir;
  auto key = new_key();
  write_log(dir / "log", key, 2);
  auto log = CommitLog::open(dir / "log", kTask, LogMode::kAppend);
  ASSERT_TRUE(log.ok());
  auto skip = log->append(make_record(3), key);
  ASSERT_FALSE(skip.ok());
  EXPECT_NE(skip.error().message.find("cannot append epoch 3: the next epoch of this log is 2"),
            std::string::npos);
  CommitRecord foreign = make_record(2);
  foreign.task_id = kOtherTask;
  EXPECT_FALSE(log->append(foreign, key).ok());
  auto ro = CommitLog::open(dir / "log", kTask, LogMode::kReadOnly);
  ASSERT_TRUE(ro.ok());
  auto refused = ro->append(make_record(2), key);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("opened read-only"), std::string::npos);
  auto absent = CommitLog::open(dir / "none", kTask, LogMode::kReadOnly);
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.error().code, Errc::kIo);
}

TEST(CommitLog, TornTailIsReportedThenCutBeforeAppending) {
  testing::ScratchDir dir;
  auto key = new_key();
  write_log(dir / "log", key, 3);
  const Bytes whole = *read_file(dir / "log");
  CommitRecord next = make_record(3);
  next.task_id = kTask;
  Bytes partial = encode_record(*sign_record(next, key));
  partial.resize(partial.size() / 2);
  ASSERT_TRUE(append_durable(dir / "log", partial).ok());

  auto ro = CommitLog::open(dir / "log", kTask, LogMode::kReadOnly);
  ASSERT_TRUE(ro.ok()) << ro.error().message;
  ASSERT_TRUE(ro->torn_tail().has_value());
  EXPECT_EQ(ro->torn_tail()->offset, whole.size());
  EXPECT_EQ(ro->torn_tail()->size, partial.size());
  EXPECT_EQ(ro->torn_tail()->epoch, 3u);
  EXPECT_NE(ro->notice().find("ends with an incomplete record"), std::string::npos);
  EXPECT_EQ(read_file(dir / "log")->size(), whole.size() + partial.size());  // untouched

  auto rw = CommitLog::open(dir / "log", kTask, LogMode::kAppend);
  ASSERT_TRUE(rw.ok()) << rw.error().message;
  EXPECT_NE(
      rw->notice().find("cut off an incomplete final record (" + std::to_string(partial.size()) +
                        " bytes at offset " + std::to_string(whole.size()) + ", epoch 3)"),
      std::string::npos)
      << rw->notice();
  EXPECT_EQ(*read_file(dir / "log"), whole);
  ASSERT_TRUE(rw->append(make_record(3), key).ok());
  auto after = CommitLog::open(dir / "log", kTask, LogMode::kReadOnly);
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_EQ(after->records().size(), 4u);
  EXPECT_FALSE(after->torn_tail().has_value());
}

// A complete final line that fails its checks is damage, not a crash: never cut silently.
TEST(CommitLog, BadCompleteFinalRecordIsAnErrorNotATornTail) {
  testing::ScratchDir dir;
  auto key = new_key();
  write_log(dir / "log", key, 2);
  Bytes bytes = *read_file(dir / "log");
  char& digit = reinterpret_cast<char&>(bytes[bytes.size() - 10]);  // in the last signature
  digit = digit == '0' ? '1' : '0';  // still hex, so only the signature check can notice
  ASSERT_TRUE(write_file_atomic(dir / "log", bytes).ok());
  auto log = CommitLog::open(dir / "log", kTask, LogMode::kAppend);
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.error().message.find("epoch 1 (line 2, offset "), std::string::npos);
  EXPECT_NE(log.error().message.find("signature does not verify"), std::string::npos)
      << log.error().message;
  EXPECT_EQ(*read_file(dir / "log"), bytes);
}

TEST(CommitLog, WireFormRoundTripsAndIsStrict) {
  auto key = new_key();
  CommitRecord r = make_record(0);
  r.task_id = kTask;
  auto s = *sign_record(r, key);
  Bytes line = encode_record(s);
  auto back = decode_record(line, "msg");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(encode_record(*back), line);
  EXPECT_EQ(back->hash, sha256(line));
  EXPECT_TRUE(verify_record(*back, 0, kTask, Digest{}, key.public_key()).ok());
  EXPECT_FALSE(verify_record(*back, 0, kOtherTask, Digest{}, key.public_key()).ok());

  Bytes no_newline(line.begin(), line.end() - 1);
  EXPECT_EQ(decode_record(no_newline, "msg").error().message,
            "msg: record does not end with a newline");
  // Signed but not canonical: one record must have exactly one byte form.
  std::string spaced = json::parse(s.body).dump(1);
  spaced.erase(std::remove(spaced.begin(), spaced.end(), '\n'), spaced.end());
  Bytes loose(spaced.begin(), spaced.end());
  loose.push_back('\t');
  append_bytes(loose, as_bytes(hex_encode(key.sign(as_bytes(spaced)))));
  loose.push_back('\n');
  EXPECT_EQ(decode_record(loose, "msg").error().message,
            "msg: body is not canonical JSON (sorted keys, no whitespace, numbers as docs/log.md "
            "spells them)");
  // A double written as an integer is another spelling of it (docs/log.md, "Numbers").
  json integral = json::parse(s.body);
  integral["metrics"]["seconds"] = 2;
  const std::string integral_body = integral.dump();
  Bytes as_integer(integral_body.begin(), integral_body.end());
  as_integer.push_back('\t');
  append_bytes(as_integer, as_bytes(hex_encode(key.sign(as_bytes(integral_body)))));
  as_integer.push_back('\n');
  EXPECT_EQ(decode_record(as_integer, "msg").error().message,
            "msg: metrics.seconds: expected a number with a fraction or exponent, got 2");
  json extra = json::parse(s.body);
  extra["note"] = "x";
  std::string extra_body = extra.dump();
  Bytes unknown(extra_body.begin(), extra_body.end());
  unknown.push_back('\t');
  append_bytes(unknown, as_bytes(hex_encode(key.sign(as_bytes(extra_body)))));
  unknown.push_back('\n');
  EXPECT_EQ(decode_record(unknown, "msg")
                .error()
                .message.rfind("msg: note: unknown field (a record "
                               "has: data_order_digest, ",
                               0),
            0u)
      << decode_record(unknown, "msg").error().message;
}

}  // namespace
// Held-out metrics (docs/log.md, metrics.eval): written only when present, doubles spelled as
// doubles, accuracy absent for regression, and read back exactly.
TEST(CommitLog, EvalMetricsRoundTripAndAreStrict) {
  auto key = new_key();
  CommitRecord r = make_record(1);
  r.task_id = kTask;
  const std::string plain = sign_record(r, key)->body;
  EXPECT_EQ(plain.find("\"eval\""), std::string::npos);  // records of other tasks keep their bytes
  r.metrics.eval = EvalClaim{0.25, 1.0, 359};
  auto s = *sign_record(r, key);
  EXPECT_NE(s.body.find("\"eval\":{\"accuracy\":1.0,\"examples\":359,\"loss\":0.25}"),
            std::string::npos)
      << s.body;
  auto back = decode_record(encode_record(s), "msg");
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_TRUE(back->record.metrics.eval.has_value());
  EXPECT_EQ(back->record.metrics.eval->loss, 0.25);
  EXPECT_EQ(back->record.metrics.eval->accuracy, 1.0);
  EXPECT_EQ(back->record.metrics.eval->examples, 359u);

  r.metrics.eval = EvalClaim{0.5, std::nullopt, 7};  // regression: no accuracy
  auto reg = decode_record(encode_record(*sign_record(r, key)), "msg");
  ASSERT_TRUE(reg.ok()) << reg.error().message;
  EXPECT_FALSE(reg->record.metrics.eval->accuracy.has_value());

  json bad = json::parse(s.body);
  bad["metrics"]["eval"]["accuracy"] = 1;
  const std::string body = bad.dump();
  Bytes line(body.begin(), body.end());
  line.push_back('\t');
  append_bytes(line, as_bytes(hex_encode(key.sign(as_bytes(body)))));
  line.push_back('\n');
  EXPECT_EQ(decode_record(line, "msg").error().message,
            "msg: metrics.eval.accuracy: expected a number with a fraction or exponent, got 1");
}

}  // namespace vt

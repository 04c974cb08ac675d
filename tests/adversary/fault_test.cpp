// Faults in stored artifacts: the verifier says which epoch or file is affected and never
// passes it.

#include <gtest/gtest.h>

#include <filesystem>

#include "common/file_io.h"
#include "tests/adversary/support.h"

namespace vt::adversary {
namespace {

namespace fs = std::filesystem;

struct Stored : StoredRun {
  Stored() : StoredRun(23) {}
};

// The outcome of challenging `epoch`: an error or a failed check, as one text; "passed" if it
// passed.
std::string challenge(const Stored& s, std::uint64_t epoch) {
  auto source = verifier::open_workdir_source(s.dir / "wd");
  if (!source) return "error: " + source.error().message;
  (*source)->set_limits(verifier::limits_for(s.task));
  auto log = (*source)->log();
  if (!log) return "error: " + log.error().message;
  // A storage audit: the "after" state is fetched even when the replay proves it.
  auto ctx = verifier::make_check_context(s.task, {}, verifier::FetchAfter::kAlways);
  if (!ctx) return "error: " + ctx.error().message;
  auto c = verifier::check_epoch(**source, *ctx, log->at(epoch - 1), log->at(epoch), false);
  if (!c) return "error: " + c.error().message;
  return c->passed ? "passed" : "failed: " + joined(c->failures);
}

TEST(Fault, CorruptedByteInEachSnapshotIsNeverPassed) {
  Stored s;
  store(s);
  ASSERT_EQ(challenge(s, 2), "passed");
  // Each snapshot file in turn, a byte in the header, the middle and the end.
  for (std::uint64_t epoch = 0; epoch <= 3; ++epoch) {
    const fs::path file = s.snapshot(epoch);
    const Bytes original = *read_file(file);
    for (std::size_t offset : {std::size_t{20}, original.size() / 2, original.size() - 1}) {
      Bytes bad = original;
      bad[offset] ^= 0x40;
      ASSERT_TRUE(write_file_atomic(file, bad).ok());
      // Challenge the epochs that read this file (as "before" or "after").
      for (std::uint64_t e : {epoch, epoch + 1}) {
        if (e < 1 || e > 3) continue;
        const std::string outcome = challenge(s, e);
        EXPECT_NE(outcome, "passed")
            << "snapshot " << epoch << " byte " << offset << ", challenging epoch " << e;
        EXPECT_NE(outcome.find("epoch " + std::to_string(epoch)), std::string::npos)
            << "snapshot " << epoch << " byte " << offset << ": " << outcome;
      }
      ASSERT_TRUE(write_file_atomic(file, original).ok());
    }
  }
  EXPECT_EQ(challenge(s, 2), "passed");  // restored: the harness itself is sound
}

TEST(Fault, MissingSnapshotIsNamed) {
  Stored s;
  store(s);
  fs::remove(s.snapshot(2));
  for (std::uint64_t e : {2, 3}) {
    const std::string outcome = challenge(s, e);
    EXPECT_NE(outcome, "passed");
    EXPECT_NE(outcome.find("epoch 2"), std::string::npos) << outcome;
  }
  EXPECT_EQ(challenge(s, 1), "passed");  // epochs 0 and 1 are untouched
}

TEST(Fault, TruncatedLogIsIncomplete) {
  Stored s;
  store(s);
  const fs::path log = s.dir / "wd" / "commitments.log";
  const Bytes bytes = *read_file(log);
  // Cut inside epoch 2's record: epochs 0 and 1 stay readable, the rest is a torn tail.
  std::size_t newlines = 0, cut = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] == '\n' && ++newlines == 2) cut = i + 1 + 40;
  }
  ASSERT_GT(cut, 40u);
  ASSERT_TRUE(write_file_atomic(log, ByteSpan(bytes).first(cut)).ok());
  auto source = verifier::open_workdir_source(s.dir / "wd");
  ASSERT_TRUE(source.ok());
  auto facts = verifier::check_log(**source, s.task, {}, true);
  ASSERT_TRUE(facts.ok()) << facts.error().message;
  EXPECT_EQ(facts->records.size(), 2u);
  EXPECT_FALSE(facts->complete);
  EXPECT_NE(joined(facts->failures).find("the log ends after epoch 1 of 3"), std::string::npos)
      << joined(facts->failures);
}

TEST(Fault, CorruptedLogByteIsRejected) {
  Stored s;
  store(s);
  const fs::path log = s.dir / "wd" / "commitments.log";
  Bytes bytes = *read_file(log);
  bytes[bytes.size() / 2] ^= 0x01;
  ASSERT_TRUE(write_file_atomic(log, bytes).ok());
  auto source = verifier::open_workdir_source(s.dir / "wd");
  ASSERT_TRUE(source.ok());
  auto facts = verifier::check_log(**source, s.task, {}, true);
  ASSERT_TRUE(facts.ok()) << facts.error().message;
  ASSERT_FALSE(facts->failures.empty());
  EXPECT_NE(joined(facts->failures).find("epoch"), std::string::npos) << joined(facts->failures);
}

}  // namespace
}  // namespace vt::adversary

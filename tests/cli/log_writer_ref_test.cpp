// docs/log.md says how every number in a BODY is spelled, so a writer that is not veritrain can
// produce records veritrain accepts: reference/log_writer_ref.py (python3 json + openssl).

#include <gtest/gtest.h>

#include "common/file_io.h"
#include "tests/test_util.h"

namespace vt {
namespace {

namespace fs = std::filesystem;

// A trained one-epoch workdir whose log the writer then rewrites with awkward doubles: one that
// nlohmann's Grisu2 would spell 3.3333333333333335e+15, and the smallest subnormal.
class IndependentWriter : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::have_program("python3") || !testing::have_program("openssl")) {
      GTEST_SKIP() << "python3 or openssl not installed";
    }
    const std::string task = (dir_ / "task.json").string();
    auto init = testing::run_command(
        testing::veritrain_binary() +
            " task init --model mlp --epochs 1 --steps-per-epoch 2 --batch-size 4 "
            "--data-option samples=16 --option hidden=8 --k 16 --out " +
            task,
        dir_.path());
    ASSERT_EQ(init.exit_code, 0) << init.err;
    auto train = testing::run_command(
        testing::veritrain_binary() + " train --task " + task + " --workdir " + workdir(),
        dir_.path());
    ASSERT_EQ(train.exit_code, 0) << train.err;
  }
  std::string workdir() const { return (dir_ / "w").string(); }
  testing::CommandResult rewrite(const std::string& writer) {
    return testing::run_command("python3 " + writer + " " + workdir() + "/commitments.log " +
                                    workdir() + "/keys/signing.key.pem 3333333333333333.5 5e-324",
                                dir_.path());
  }
  testing::CommandResult log_verify() {
    return testing::run_command(testing::veritrain_binary() + " log verify --workdir " + workdir(),
                                dir_.path());
  }
  testing::ScratchDir dir_;
};

TEST_F(IndependentWriter, BodyWrittenByPythonIsAcceptedByLogVerify) {
  auto w = rewrite(std::string(VT_SOURCE_DIR) + "/reference/log_writer_ref.py");
  ASSERT_EQ(w.exit_code, 0) << w.err;
  const std::string log = *read_text_file(workdir() + "/commitments.log");
  EXPECT_NE(
      log.find(R"("metrics":{"loss":3333333333333333.5,"samples":8,"seconds":5e-324,"steps":2})"),
      std::string::npos)
      << log;
  auto v = log_verify();
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

// The same writer with nlohmann's spelling of the same double: properly signed, but a second
// byte form of one record, which the reader refuses.
TEST_F(IndependentWriter, AnotherSpellingOfTheSameNumberIsRefused) {
  std::string text = *read_text_file(std::string(VT_SOURCE_DIR) + "/reference/log_writer_ref.py");
  const std::string dumps = "ensure_ascii=False).encode()";
  ASSERT_NE(text.find(dumps), std::string::npos);
  text.replace(text.find(dumps), dumps.size(),
               dumps + ".replace(b\"3333333333333333.5\", b\"3.3333333333333335e+15\")");
  const std::string writer = (dir_ / "writer_grisu.py").string();
  ASSERT_TRUE(write_file_atomic(writer, text).ok());
  auto w = rewrite(writer);
  ASSERT_EQ(w.exit_code, 0) << w.err;
  auto v = log_verify();
  EXPECT_NE(v.exit_code, 0);
  EXPECT_NE(v.err.find("not canonical"), std::string::npos) << v.err;
  EXPECT_NE(v.err.find("epoch 0"), std::string::npos) << v.err;
}

}  // namespace
}  // namespace vt

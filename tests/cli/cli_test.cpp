// The binary's contract with its users: exit codes, --help, --version, --json.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace vt {
namespace {

using testing::run_command;
using testing::veritrain_binary;

TEST(Cli, HelpListsCommandsAndExitsZero) {
  testing::ScratchDir dir;
  auto r = run_command(veritrain_binary() + " --help", dir.path());
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("keygen"), std::string::npos);
  EXPECT_NE(r.out.find("Exit codes"), std::string::npos);
}

TEST(Cli, UnknownCommandIsUsageErrorWithHint) {
  testing::ScratchDir dir;
  auto r = run_command(veritrain_binary() + " frobnicate", dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("veritrain --help"), std::string::npos) << r.err;
}

TEST(Cli, VersionNamesLibtorchAndCuda) {
  testing::ScratchDir dir;
  auto r = run_command(veritrain_binary() + " --version", dir.path());
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("veritrain 0."), std::string::npos);
  EXPECT_NE(r.out.find("libtorch "), std::string::npos);
  EXPECT_NE(r.out.find("cuda "), std::string::npos);
  auto j = run_command(veritrain_binary() + " --json --version", dir.path());
  auto parsed = nlohmann::json::parse(j.out);
  EXPECT_TRUE(parsed.contains("libtorch"));
  EXPECT_TRUE(parsed["cuda_available"].is_boolean());
}

TEST(Cli, KeygenWritesKeysAndRefusesToOverwrite) {
  testing::ScratchDir dir;
  auto keys = (dir / "keys").string();
  auto r = run_command(veritrain_binary() + " --json keygen --out " + keys, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["signing_public_key_sha256"].get<std::string>().size(), 64u);
  EXPECT_TRUE(std::filesystem::exists(dir / "keys/tls.cert.pem"));
  auto again = run_command(veritrain_binary() + " keygen --out " + keys, dir.path());
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("refusing to overwrite"), std::string::npos);
}

TEST(Cli, MissingRequiredOptionIsUsageError) {
  testing::ScratchDir dir;
  auto r = run_command(veritrain_binary() + " keygen", dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--out"), std::string::npos);
}

}  // namespace
}  // namespace vt

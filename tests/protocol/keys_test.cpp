#include "protocol/keys.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "common/file_io.h"
#include "tests/test_util.h"

namespace vt {
namespace {

TEST(Keys, SignAndVerify) {
  auto key = SigningKey::generate();
  ASSERT_TRUE(key.ok());
  Bytes msg{1, 2, 3};
  Bytes sig = key->sign(msg);
  EXPECT_EQ(sig.size(), 64u);
  EXPECT_TRUE(key->public_key().verify(msg, sig));
  msg[0] ^= 1;
  EXPECT_FALSE(key->public_key().verify(msg, sig));
}

TEST(Keys, IdentityFilesRoundTripAndAreNotOverwritten) {
  testing::ScratchDir dir;
  auto id = generate_identity(dir.path());
  ASSERT_TRUE(id.ok()) << id.error().message;
  EXPECT_EQ(id->signing_fingerprint.size(), 64u);
  struct stat st {};
  ASSERT_EQ(::stat((dir / "signing.key.pem").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir / "tls.key.pem").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  auto key = SigningKey::load(dir / "signing.key.pem");
  auto pub = PublicKey::load(dir / "signing.pub.pem");
  ASSERT_TRUE(key.ok() && pub.ok());
  EXPECT_EQ(pub->fingerprint(), id->signing_fingerprint);
  EXPECT_TRUE(pub->verify(as_bytes("hello"), key->sign(as_bytes("hello"))));

  auto before = read_file(dir / "signing.key.pem");
  auto again = generate_identity(dir.path());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("refusing to overwrite"), std::string::npos);
  EXPECT_EQ(*read_file(dir / "signing.key.pem"), *before);
}

TEST(Keys, LoadRejectsNonKeys) {
  testing::ScratchDir dir;
  ASSERT_TRUE(write_file_atomic(dir / "junk.pem", std::string_view("not a key")).ok());
  auto key = SigningKey::load(dir / "junk.pem");
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.error().message.find("junk.pem"), std::string::npos);
}

// Our signatures must verify with a third party's tool, not only with our own code.
TEST(Keys, OpensslCliVerifiesOurSignature) {
  if (!testing::have_program("openssl")) GTEST_SKIP() << "openssl CLI not installed";
  testing::ScratchDir dir;
  ASSERT_TRUE(generate_identity(dir.path()).ok());
  auto key = SigningKey::load(dir / "signing.key.pem");
  ASSERT_TRUE(key.ok());
  std::string message = "veritrain commitment";
  ASSERT_TRUE(write_file_atomic(dir / "msg", std::string_view(message)).ok());
  ASSERT_TRUE(write_file_atomic(dir / "sig", key->sign(as_bytes(message))).ok());
  std::string verify = "openssl pkeyutl -verify -pubin -inkey " +
                       (dir / "signing.pub.pem").string() + " -rawin -in " +
                       (dir / "msg").string() + " -sigfile " + (dir / "sig").string();
  auto ok = testing::run_command(verify, dir.path());
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("Signature Verified Successfully"), std::string::npos);
  ASSERT_TRUE(write_file_atomic(dir / "msg", std::string_view("veritrain commitmenT")).ok());
  EXPECT_NE(testing::run_command(verify, dir.path()).exit_code, 0);
  // And the TLS certificate parses and matches its key.
  auto cert = testing::run_command(
      "openssl x509 -noout -subject -in " + (dir / "tls.cert.pem").string(), dir.path());
  EXPECT_EQ(cert.exit_code, 0);
  EXPECT_NE(cert.out.find("veritrain-provider"), std::string::npos);
}

}  // namespace
}  // namespace vt

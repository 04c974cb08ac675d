// The verifier's trust anchor and signed verdicts: --provider-key parsing, verdicts
// that name both keys and refuse to be read without them, and a provider's bytes that cannot
// stop its verdict from being written.
#include <gtest/gtest.h>

#include "common/file_io.h"
#include "common/json.h"
#include "tests/test_util.h"
#include "verifier/check/provider_key.h"
#include "verifier/report/verdict.h"

namespace vt::verifier {
namespace {

Verdict rejected_verdict() {
  Verdict v;
  v.task_id = std::string(64, 'a');
  v.log_head = std::string(64, 'b');
  v.epochs = 2;
  v.source = "workdir /w";
  v.provider_key = std::string(64, 'c');
  v.provider_key_pinned = true;
  v.log_failures = {
      "epoch 1: the committed state: metadata intra_op_threads is \"2\", the task says 1"};
  finalize_verdict(v);
  return v;
}

TEST(ProviderKey, TakesAFingerprintOrAPublicKeyFile) {
  testing::ScratchDir dir;
  const SigningKey key = *SigningKey::generate();
  const std::string fp = key.public_key().fingerprint();
  std::string upper = fp;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(*parse_provider_key(fp), fp);
  EXPECT_EQ(*parse_provider_key(upper), fp);
  ASSERT_TRUE(write_file_atomic(dir / "p.pem", key.public_key().to_pem()).ok());
  EXPECT_EQ(*parse_provider_key((dir / "p.pem").string()), fp);

  auto short_hex = parse_provider_key(fp.substr(1));
  ASSERT_FALSE(short_hex.ok());
  EXPECT_EQ(short_hex.error().code, Errc::kInvalidInput);
  EXPECT_NE(short_hex.error().message.find("--provider-key"), std::string::npos);
  ASSERT_TRUE(write_file_atomic(dir / "junk.pem", std::string_view("not a key\n")).ok());
  auto junk = parse_provider_key((dir / "junk.pem").string(), "--signer");
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.error().code, Errc::kInvalidInput);
  EXPECT_EQ(junk.error().message.rfind("--signer", 0), 0u) << junk.error().message;
}

TEST(SignedVerdict, NamesTheProviderKeyAndTheVerifierKey) {
  const SigningKey key = *SigningKey::generate();
  auto text = signed_verdict_text(rejected_verdict(), key);
  ASSERT_TRUE(text.ok()) << text.error().message;
  auto checked = verify_verdict_text(*text, key.public_key());
  ASSERT_TRUE(checked.ok()) << checked.error().message;
  EXPECT_FALSE(checked->accepted);
  EXPECT_EQ(checked->provider_key, std::string(64, 'c'));
  EXPECT_TRUE(checked->provider_key_pinned);
  EXPECT_EQ(checked->verdict["verifier"]["fingerprint"], key.public_key().fingerprint());
}

// A verdict body without the provider key is not a verdict of this format, even when signed.
TEST(SignedVerdict, WithoutTheProviderKeyIsMalformed) {
  const SigningKey key = *SigningKey::generate();
  nlohmann::json body = verdict_to_json(rejected_verdict(), key.public_key());
  body.erase("provider");
  const std::string b = canonical_json(body);
  const std::string text = "{\"signature\":\"" + hex_encode(key.sign(as_bytes(b))) +
                           "\",\"signer\":\"" + hex_encode(key.public_key().raw()) +
                           "\",\"verdict\":" + b + "}\n";
  auto checked = verify_verdict_text(text, std::nullopt);
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.error().code, Errc::kInvalidInput);
  EXPECT_NE(checked.error().message.find("verdict.provider"), std::string::npos)
      << checked.error().message;
}

// Text a provider controls (an error message it sent) may hold invalid UTF-8: the verdict is
// still written and signed, with the bad bytes replaced.
TEST(SignedVerdict, InvalidUtf8FromTheProviderCannotPreventIt) {
  const SigningKey key = *SigningKey::generate();
  Verdict v = rejected_verdict();
  v.log_failures.push_back("epoch 2: the provider said \xff\xfe");
  finalize_verdict(v);
  auto text = signed_verdict_text(v, key);
  ASSERT_TRUE(text.ok()) << text.error().message;
  auto checked = verify_verdict_text(*text, key.public_key());
  ASSERT_TRUE(checked.ok()) << checked.error().message;
  EXPECT_NE(checked->verdict["reasons"].dump().find("the provider said"), std::string::npos);
}

}  // namespace
}  // namespace vt::verifier

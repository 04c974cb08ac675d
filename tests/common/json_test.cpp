#include "common/json.h"

#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "common/json_fields.h"
#include "tests/test_util.h"

namespace vt {
namespace {

TEST(CanonicalJson, DoublesAreSpelledAsPythonRepr) {
  // Expected strings are Python 3's repr() of the same doubles (docs/log.md, "Numbers").
  const std::pair<double, const char*> cases[] = {
      {0.1, "0.1"},
      {0.30000000000000004, "0.30000000000000004"},
      {2.0, "2.0"},
      {1e-05, "1e-05"},
      {0.0001, "0.0001"},
      {1e16, "1e+16"},
      {1e15, "1000000000000000.0"},
      {3333333333333333.5, "3333333333333333.5"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {-1.5, "-1.5"},
      {123456789.125, "123456789.125"},
      {1e22, "1e+22"},
      {2.302, "2.302"},
      {0.0005, "0.0005"},
      {1e-08, "1e-08"},
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {0.7999999999999999, "0.7999999999999999"}};
  for (const auto& [value, text] : cases) EXPECT_EQ(json_double_text(value), text) << text;
  EXPECT_EQ(canonical_json(nlohmann::json{{"b", 1e15}, {"a", {1, 2.5, "x"}}}),
            R"({"a":[1,2.5,"x"],"b":1000000000000000.0})");
}

// Strings, plain or not, as nlohmann::json writes them: every ASCII character alone and amid text,
// and multi-byte UTF-8, as values and as keys.
TEST(CanonicalJson, StringsAreSpelledAsDumpSpellsThem) {
  std::vector<std::string> cases = {"", "plain", "QUJD+/==", "caf\xc3\xa9", "\xe2\x82\xac 5"};
  for (int c = 0; c < 128; ++c) {
    cases.emplace_back(1, static_cast<char>(c));
    cases.push_back("ab" + std::string(1, static_cast<char>(c)) + "cd");
  }
  for (const std::string& s : cases) {
    EXPECT_EQ(canonical_json(nlohmann::json(s)), nlohmann::json(s).dump()) << s;
    const nlohmann::json object = {{s, s}};
    EXPECT_EQ(canonical_json(object), object.dump()) << s;
  }
}

// Random bit patterns (every exponent range, subnormals included) against python3 itself.
TEST(CanonicalJson, DoublesAgreeWithPythonOnRandomBitPatterns) {
  if (!testing::have_program("python3")) GTEST_SKIP() << "python3 not installed";
  testing::ScratchDir dir;
  std::uint64_t state = 12345;
  std::string hex, expected;
  for (int i = 0; i < 20000; ++i) {
    state += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    double v;
    std::memcpy(&v, &z, sizeof v);
    if (!std::isfinite(v)) continue;
    char line[24];
    std::snprintf(line, sizeof line, "%016llx\n", static_cast<unsigned long long>(z));
    hex += line;
    expected += json_double_text(v) + "\n";
  }
  ASSERT_TRUE(write_file_atomic(dir / "bits", hex).ok());
  ASSERT_TRUE(
      write_file_atomic(dir / "repr.py",
                        "import struct,sys\n"
                        "for l in open(sys.argv[1]):\n"
                        "    print(repr(struct.unpack('>d', bytes.fromhex(l.strip()))[0]))\n")
          .ok());
  auto r = testing::run_command(
      "python3 " + (dir / "repr.py").string() + " " + (dir / "bits").string(), dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected);
}

// A required field that is a finite number or null: null reads as none, anything else is named.
TEST(JsonFields, NumberOrNoneReadsNullAsNoneAndRefusesTheRest) {
  const nlohmann::json doc =
      nlohmann::json::parse(R"({"none": null, "half": 0.5, "word": "x", "inf": "inf"})");
  const JsonFields fields(doc, "state.json", "policy");
  std::optional<double> out = 1.0;
  ASSERT_TRUE(fields.number_or_none("none", out).ok());
  EXPECT_FALSE(out.has_value());
  ASSERT_TRUE(fields.number_or_none("half", out).ok());
  EXPECT_EQ(out, 0.5);
  const Status word = fields.number_or_none("word", out);
  ASSERT_FALSE(word.ok());
  EXPECT_EQ(word.error().message, R"(state.json: policy.word: expected a number, got "x")");
  EXPECT_FALSE(fields.number_or_none("inf", out).ok());
  const Status missing = fields.number_or_none("absent", out);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("policy.absent: missing"), std::string::npos)
      << missing.error().message;
  EXPECT_EQ(out, 0.5);  // a refused field leaves the value as it was
}

}  // namespace
}  // namespace vt

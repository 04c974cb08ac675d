// The operator table (training/script/op_table.h) against what it stands for: the docs that
// define each operator and the referee that recomputes the kernels each one traces. Torch-free;
// tests/training/op_registry_test.cpp holds it to LibTorch's registry.
#include "training/script/op_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "common/file_io.h"
#include "dispute/recompute.h"

namespace vt::training {
namespace {

std::string doc(const char* name) {
  auto text = read_text_file(std::string(VT_SOURCE_DIR) + "/docs/" + name);
  EXPECT_TRUE(text.ok()) << name;
  return text.ok() ? *text : std::string();
}

std::string section(const std::string& text, const std::string& heading) {
  const std::size_t begin = text.find("\n## " + heading + "\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find("\n## ", begin + 1) - begin);
}

std::string short_name(std::string_view aten) {
  std::string name(aten.substr(aten.find("::") + 2));
  return name;
}

bool rewritten(const PortableOp& op) {
  return op.form == OpForm::kKernel || op.form == OpForm::kComposition ||
         op.form == OpForm::kInPlace || op.form == OpForm::kDecomposition;
}

TEST(OpTable, EachVeritrainOperatorHasOneSchemaWithItsName) {
  std::map<std::string, int> schemas;
  std::set<std::string> named;
  for (const PortableOp& op : portable_ops()) {
    if (op.form == OpForm::kDecomposition) {
      EXPECT_TRUE(!op.ours.empty() && op.schema.empty()) << op.aten;
      // The function is decompositions.py's: "def l1_loss(".
      EXPECT_NE(decomposition_source().find("\ndef " + std::string(op.ours) + "("),
                std::string_view::npos)
          << op.aten << ": decompositions.py has no " << op.ours;
      continue;
    }
    if (rewritten(op)) {
      EXPECT_FALSE(op.ours.empty()) << op.aten;
      named.emplace(op.ours);
    } else {
      EXPECT_TRUE(op.ours.empty() && op.schema.empty() && op.traced.empty()) << op.aten;
      EXPECT_EQ(op.overload, kAnyOverload) << op.aten;
    }
    if (op.schema.empty()) continue;
    // The schema names the operator it defines: "relu(Tensor self) -> Tensor".
    EXPECT_EQ(op.schema.substr(0, op.ours.size() + 1), std::string(op.ours) + "(") << op.schema;
    ++schemas[std::string(op.ours)];
  }
  for (const std::string& ours : named) EXPECT_EQ(schemas[ours], 1) << "veritrain::" << ours;
}

// A node matches one entry: no two entries claim the same operator and overload.
TEST(OpTable, NoOperatorIsClaimedTwice) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const PortableOp& op : portable_ops()) {
    const std::string kind = rewritten(op) ? "rewritten" : "libtorch";
    EXPECT_TRUE(seen.emplace(std::string(op.aten) + " " + kind, op.overload).second)
        << op.aten << "." << op.overload;
  }
}

// Every kernel an operator traces is one the referee recomputes (and docs/dispute.md lists: its
// own test), so a dispute over any portable module comes down to one operator.
TEST(OpTable, TheRefereeRecomputesEveryKernelAnOperatorTraces) {
  const auto& refereed = dispute::refereed_operators();
  for (const PortableOp& op : portable_ops()) {
    if (op.form == OpForm::kKernel) {
      EXPECT_FALSE(op.traced.empty()) << op.aten << " traces no kernel";
    }
    std::istringstream names{std::string(op.traced)};
    for (std::string name; names >> name;) {
      EXPECT_NE(std::find(refereed.begin(), refereed.end(), name), refereed.end())
          << op.aten << " traces " << name << ", which the referee does not recompute";
    }
  }
}

// Each entry points at the paragraph that defines its arithmetic, and "TorchScript modules"
// names every operator of the table: the list a requestor reads is the one the rewrite uses.
TEST(OpTable, DocsPortableDefinesAndListsEveryOperator) {
  const std::string portable = doc("portable.md");
  const std::string modules = section(portable, "TorchScript modules");
  ASSERT_FALSE(modules.empty());
  std::set<std::string> names;
  for (const PortableOp& op : portable_ops()) {
    const std::string anchor(op.doc);
    EXPECT_TRUE(portable.find("**" + anchor) != std::string::npos ||
                portable.find("\n## " + anchor + "\n") != std::string::npos)
        << op.aten << ": docs/portable.md has no paragraph \"" << anchor << "\"";
    const std::string name = short_name(op.aten);
    names.insert(name);
    EXPECT_NE(modules.find("`" + name + "`"), std::string::npos)
        << "docs/portable.md, \"TorchScript modules\", does not name `" << name << "`";
  }
  // The other way: every operator the section's table says runs portably is in the table.
  const std::size_t table = modules.find("| in the module | runs as |");
  ASSERT_NE(table, std::string::npos);
  const std::string rows = modules.substr(table, modules.find("\n\n", table) - table);
  const std::regex quoted("`([a-z_0-9]+)`");
  for (auto it = std::sregex_iterator(rows.begin(), rows.end(), quoted);
       it != std::sregex_iterator(); ++it)
    EXPECT_EQ(names.count((*it)[1]), 1u)
        << "docs/portable.md lists `" << (*it)[1] << "`, which the operator table does not have";
}

}  // namespace
}  // namespace vt::training

// gradient_groups and world_size (docs/task.md): which enters the task_id, and their checks.
#include <gtest/gtest.h>

#include "protocol/task.h"

namespace vt {
namespace {

std::string with(std::string_view extra) {
  return R"({"model": {"name": "mlp"}, "dataset": {"name": "synthetic"}, "epochs": 3, "batch_size": 32)" +
         std::string(extra) + "}";
}

std::string error_of(const std::string& text) {
  auto task = parse_task(text, "task.json");
  return task.ok() ? std::string("(accepted)") : task.error().message;
}

TEST(TaskGroups, OneGroupIsTheTaskWithoutTheField) {
  auto plain = parse_task(with(""));
  auto one = parse_task(with(R"(, "gradient_groups": 1, "world_size": 1)"));
  ASSERT_TRUE(plain.ok() && one.ok());
  EXPECT_EQ(canonical_task_json(*plain), canonical_task_json(*one));
  EXPECT_EQ(canonical_task_json(*plain).find("gradient_groups"), std::string::npos);
}

TEST(TaskGroups, GroupsEnterTheTaskIdWorldSizeDoesNot) {
  auto g4 = parse_task(with(R"(, "gradient_groups": 4)"));
  auto g4w2 = parse_task(with(R"(, "gradient_groups": 4, "world_size": 2)"));
  auto plain = parse_task(with(""));
  ASSERT_TRUE(g4.ok() && g4w2.ok() && plain.ok());
  EXPECT_NE(task_id(*g4), task_id(*plain));
  EXPECT_EQ(task_id(*g4), task_id(*g4w2));
  EXPECT_EQ(g4w2->world_size, 2);
  // Shown where a person reads the task, and read back from there.
  auto again = parse_task(pretty_task_json(*g4w2));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->world_size, 2);
  EXPECT_EQ(again->gradient_groups, 4);
}

TEST(TaskGroups, BadValuesAreNamed) {
  EXPECT_NE(
      error_of(with(R"(, "gradient_groups": 3)")).find("gradient_groups: expected a power of two"),
      std::string::npos);
  EXPECT_NE(error_of(with(R"(, "gradient_groups": 0)")).find("gradient_groups"), std::string::npos);
  EXPECT_NE(error_of(with(R"(, "gradient_groups": 64)")).find("a divisor of batch_size (32)"),
            std::string::npos);
  EXPECT_NE(error_of(with(R"(, "gradient_groups": 4, "world_size": 8)"))
                .find("world_size: expected a power of two <= gradient_groups (4)"),
            std::string::npos);
  EXPECT_NE(error_of(with(R"(, "gradient_groups": 4, "world_size": 3)")).find("world_size"),
            std::string::npos);
  EXPECT_EQ(error_of(with(R"(, "gradient_groups": 32, "world_size": 32)")), "(accepted)");
}

}  // namespace
}  // namespace vt

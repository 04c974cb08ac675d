#include "training/zoo/zoo.h"

#include <gtest/gtest.h>

namespace vt::training {
namespace {

TEST(Zoo, EveryModelHasAValidDefaultTask) {
  for (const ModelRow& m : zoo_models()) {
    if (m.user_module) continue;  // needs a module file
    auto task = default_task(m.name, "synthetic");
    ASSERT_TRUE(task.ok()) << m.name << ": " << task.error().message;
    EXPECT_TRUE(validate_for_training(*task).ok()) << m.name;
    EXPECT_TRUE(validate_task(*task).ok())
        << m.name << ": " << validate_task(*task).error().message;
  }
}

TEST(Zoo, UnknownAndOutOfRangeOptionsNameTheirPath) {
  Task task = *default_task("cnn", "synthetic");
  task.model.options["depth"] = 3;
  auto s = validate_for_training(task);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find(
                "model.options.depth: unknown option for cnn (known: width, blocks, classes)"),
            std::string::npos)
      << s.error().message;
  task = *default_task("cnn", "synthetic");
  task.model.options["width"] = 0;
  EXPECT_NE(validate_for_training(task).error().message.find(
                "model.options.width: expected 1..1024, got 0"),
            std::string::npos);
}

TEST(Zoo, MismatchedPairsAreRefused) {
  Task task = *default_task("gpt", "synthetic");
  task.model.options["heads"] = 5;
  EXPECT_NE(validate_for_training(task).error().message.find("not a multiple of heads"),
            std::string::npos);
  task = *default_task("conv3d", "synthetic");
  task.loss = "cross_entropy";
  EXPECT_NE(validate_for_training(task).error().message.find("trains with mse"), std::string::npos);
  task = *default_task("gpt", "synthetic");
  task.dataset.name = "cifar10";
  EXPECT_FALSE(validate_for_training(task).ok());
}

}  // namespace
}  // namespace vt::training

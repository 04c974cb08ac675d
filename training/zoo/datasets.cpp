// The dataset table: one row per dataset a task can name (training/zoo/zoo.h, docs/datasets.md).
// Reading them is training/data/'s; a row says what a dataset is, takes and feeds.
#include "training/zoo/zoo.h"

namespace vt::training {
namespace {

std::vector<DatasetRow> make_datasets() {
  std::vector<DatasetRow> rows(kDatasetKinds);
  auto row = [&](DatasetKind kind) -> DatasetRow& {
    DatasetRow& r = rows[static_cast<std::size_t>(kind)];
    r.kind = kind;
    return r;
  };
  const std::vector<OptionSpec> limit = {
      {"limit", 0, 0, 1 << 24, "use the first N examples; 0 = all"}};
  {
    DatasetRow& r = row(DatasetKind::kSynthetic);
    r.name = "synthetic";
    r.description = "generated from the task seed for the model's input (its options: samples)";
  }
  {
    DatasetRow& r = row(DatasetKind::kMnist);
    r.name = "mnist";
    r.description = "MNIST's idx files (train-images, train-labels; .gz too)";
    r.feeds = "784-feature vectors";
    r.input = InputKind::kFeatures;
    r.classes = 10;
    r.features = 784;
    r.pinned_files = true;
    r.train_file_prefix = "train-";
    r.options = limit;
  }
  {
    DatasetRow& r = row(DatasetKind::kCifar10);
    r.name = "cifar10";
    r.description = "CIFAR-10's binary batches (data_batch_1..5.bin)";
    r.feeds = "3x32x32 images";
    r.input = InputKind::kImages;
    r.classes = 10;
    r.pinned_files = true;
    r.train_file_prefix = "data_batch_";
    r.options = limit;
  }
  {
    DatasetRow& r = row(DatasetKind::kTensors);
    r.name = "tensors";
    r.description = "safetensors files of `inputs` and `targets`, memory-mapped (shards allowed)";
    r.pinned_files = true;
    r.memory_mapped = true;
    r.row_eval_split = true;
  }
  {
    DatasetRow& r = row(DatasetKind::kTokens);
    r.name = "tokens";
    r.description = "flat u16 or u32 token files, memory-mapped, cut into windows";
    r.feeds = "token windows";
    r.input = InputKind::kTokens;
    r.pinned_files = true;
    r.memory_mapped = true;
    r.options = {{"context", 0, 0, 1 << 20, "tokens per example; 0 = the gpt's seq_len"},
                 {"token_bits", 16, 16, 32, "16 (u16 files) or 32 (u32 files)"}};
  }
  return rows;
}

}  // namespace

const std::vector<DatasetRow>& zoo_datasets() {
  static const std::vector<DatasetRow> rows = make_datasets();
  return rows;
}

const DatasetRow& dataset_row(DatasetKind kind) {
  return zoo_datasets()[static_cast<std::size_t>(kind)];
}

const DatasetRow* find_dataset(std::string_view name) {
  for (const DatasetRow& d : zoo_datasets()) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

std::vector<OptionSpec> synthetic_options(InputKind input) {
  switch (input) {
    case InputKind::kFeatures:
      return {{"samples", 512, 1, 1 << 24, "examples"},
              {"input_dim", 32, 1, 1 << 20, "features per example (torchscript models)"},
              {"classes", 4, 2, 100000, "classes (torchscript models)"}};
    case InputKind::kImages:
      return {{"samples", 256, 1, 1 << 22, "images"}};
    case InputKind::kVolumes:
      return {{"samples", 8, 1, 1 << 16, "volumes"}};
    case InputKind::kTokens:
      return {{"samples", 256, 1, 1 << 22, "sequences"}};
  }
  return {};
}

}  // namespace vt::training

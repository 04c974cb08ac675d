// User TorchScript modules (docs/models.md): loading, the mutable-attribute check, calls that
// turn the interpreter's errors into the module's own message, and saving for `export`.
#include "training/script/module.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/script.h>

#include <set>
#include <sstream>

#include "common/file_io.h"
#include "common/sha256.h"
#include "training/model/network.h"
#include "training/model/ops.h"
#include "training/script/operators.h"
#include "training/script/rewrite.h"

namespace vt::training {

namespace {

// The one executor configuration every process runs a module under (docs/training.md,
// "TorchScript's executor"). LibTorch's default profiling executor runs a module's first calls
// op by op, then swaps in a graph specialised on what it profiled, with its own autodiff
// formulas and fusions: call 3 gives other gradients than call 1 on the same inputs, so a replay
// in a fresh process would not reach an honest provider's bits. With the executor's
// optimisation off every call runs the module's operators one by one, each differentiated by
// LibTorch's autograd, as on its first call. The switch is per thread, so it is set around every
// call, on the thread that makes it.
class FixedScriptExecutor {
 public:
  FixedScriptExecutor() : was_(torch::jit::getGraphExecutorOptimize()) {
    torch::jit::setGraphExecutorOptimize(false);
  }
  ~FixedScriptExecutor() { torch::jit::setGraphExecutorOptimize(was_); }
  FixedScriptExecutor(const FixedScriptExecutor&) = delete;
  FixedScriptExecutor& operator=(const FixedScriptExecutor&) = delete;

 private:
  bool was_;
};

// Runs `module` itself, or in portable arithmetic a rewritten clone of it (make_portable) that
// shares its parameters and buffers; `module` stays as loaded, for export.
class ScriptNetwork final : public Network {
 public:
  ScriptNetwork(const torch::jit::Module& module, std::unique_ptr<Ops> portable_ops,
                const torch::jit::Module& run)
      : module_(module), run_(run), ops_(std::move(portable_ops)) {}
  at::Tensor forward(const at::Tensor& input) override {
    return call({input}, "forward(inputs) on inputs " + describe_tensor(input));
  }
  at::Tensor forward_loss(const at::Tensor& input, const at::Tensor& target) override {
    return call({input, target}, "forward(inputs, targets) on inputs " + describe_tensor(input) +
                                     " and targets " + describe_tensor(target));
  }
  at::Tensor loss(const LossSpec& loss, const at::Tensor& output,
                  const at::Tensor& target) override {
    return ops_ ? ops_->loss(loss, output, target) : compute_loss(loss, output, target);
  }
  bool portable() const override { return ops_ != nullptr; }
  void begin_forward(std::int64_t global_step, std::int64_t group) override {
    if (ops_) ops_->begin_forward(global_step, group);
  }
  std::map<std::string, std::string> parameter_modules() override {
    std::map<std::string, std::string> out;
    for (const auto& m : module_.named_modules()) {
      const std::string prefix = m.name.empty() ? "" : m.name + ".";
      const auto type = m.value.type()->name();
      for (const auto& p : m.value.named_parameters(/*recurse=*/false))
        out[prefix + p.name] = module_kind(type ? type->qualifiedName() : "");
    }
    return out;
  }
  NamedTensors parameters() override {
    NamedTensors out;
    for (const auto& p : module_.named_parameters(true)) out.emplace_back(p.name, p.value);
    return out;
  }
  NamedTensors buffers() override {
    NamedTensors out;
    for (const auto& b : module_.named_buffers(true)) out.emplace_back(b.name, b.value);
    return out;
  }
  // run_ is module_ itself in LibTorch's arithmetic, a clone with its own attributes in the
  // portable one.
  void to(const at::Device& device) override {
    module_.to(device);
    if (ops_) run_.to(device);
  }
  void set_training(bool training) override {
    module_.train(training);
    if (ops_) run_.train(training);
  }
  Status save_torchscript(const std::filesystem::path& file) override {
    std::ostringstream out;
    module_.save(out);
    return write_file_atomic(file, std::string_view(out.str()));
  }

 private:
  at::Tensor call(std::vector<c10::IValue> args, const std::string& what) {
    const std::size_t arity = args.size();
    c10::IValue result;
    try {
      const FixedScriptExecutor executor;
      const ScriptOpsScope scope(ops_.get());
      result = run_.forward(std::move(args));
    } catch (const std::exception& e) {
      const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
      std::string message =
          model_message(c10_error ? c10_error->what_without_backtrace() : e.what());
      // A forward(x, y) called with inputs alone: a module that computes its own loss.
      if (arity == 1 && message.find("missing value for argument") != std::string::npos) {
        message +=
            " (a forward(inputs, targets) that returns the loss is trained with "
            "`task init --loss model`; docs/models.md)";
      }
      throw ModelError("the model's " + what + " failed: " + message);
    }
    return output_tensor(result, what);
  }

  // What a forward returns, as torchvision's models return it (docs/models.md, "What forward
  // returns"): a tensor; a tuple or named tuple whose first field is the main output
  // (GoogLeNetOutputs' logits; a loss module's (loss, logits)); a dict's "out" (segmentation).
  static at::Tensor output_tensor(const c10::IValue& result, const std::string& what) {
    if (result.isTensor()) return result.toTensor();
    if (result.isTuple()) {
      const auto& fields = result.toTupleRef().elements();
      if (!fields.empty() && fields[0].isTensor()) return fields[0].toTensor();
    }
    if (result.isGenericDict()) {
      for (const auto& entry : result.toGenericDict()) {
        if (entry.key().isString() && entry.key().toStringRef() == "out" &&
            entry.value().isTensor())
          return entry.value().toTensor();
      }
    }
    throw ModelError("the model's " + what + " returned " + result.tagKind() +
                     "; expected a tensor, a tuple whose first element is the output tensor, "
                     "or a dict whose \"out\" is (docs/models.md, \"What forward returns\")");
  }
  torch::jit::Module module_;
  torch::jit::Module run_;
  std::unique_ptr<Ops> ops_;  // portable arithmetic's; null in LibTorch's
};

// State a snapshot does not hold breaks replay: an attribute that is not a parameter or buffer
// (a Python int counter, a list that grows) and that the module changes. Found by reading every
// method's graph for assignments to attributes and mutating calls on container attributes.
Status check_no_mutable_attributes(const torch::jit::Module& root, const std::string& file) {
  using torch::jit::Node;
  static const std::set<std::string> kMutating = {
      "aten::append",     "aten::insert",    "aten::extend", "aten::pop",
      "aten::clear",      "aten::_set_item", "aten::remove", "aten::update",
      "aten::setdefault", "aten::popitem",   "aten::sort",   "aten::reverse"};
  auto refuse = [&](const std::string& attribute, const std::string& type,
                    const std::string& method) {
    return invalid_input(
        file + ": attribute \"" + attribute + "\" (" + type + ") is changed by " + method +
        "(); only parameters and buffers are saved in snapshots, so a replay would start from "
        "another value. Make it a buffer (register_buffer) or a constant.");
  };
  for (const auto& module : root.modules()) {
    for (const auto& method : module.get_methods()) {
      std::vector<torch::jit::Block*> blocks{method.graph()->block()};
      while (!blocks.empty()) {
        torch::jit::Block* block = blocks.back();
        blocks.pop_back();
        for (Node* n : block->nodes()) {
          for (torch::jit::Block* inner : n->blocks()) blocks.push_back(inner);
          if (n->kind() == c10::prim::SetAttr) {
            const std::string name = n->s(c10::attr::name);
            auto cls = n->inputs()[0]->type()->cast<c10::ClassType>();
            if (!cls) continue;
            auto slot = cls->findAttributeSlot(name);
            if (slot && (cls->is_parameter(*slot) || cls->is_buffer(*slot))) continue;
            return refuse(name, n->inputs()[1]->type()->repr_str(), method.name());
          }
          if (n->kind() != c10::prim::GetAttr) continue;
          const auto kind = n->output()->type()->kind();
          if (kind != c10::TypeKind::ListType && kind != c10::TypeKind::DictType) continue;
          for (const torch::jit::Use& use : n->output()->uses()) {
            if (kMutating.count(use.user->kind().toQualString())) {
              return refuse(n->s(c10::attr::name), n->output()->type()->repr_str(), method.name());
            }
          }
        }
      }
    }
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<Network>> load_torchscript(const Task& task,
                                                  const std::filesystem::path& task_dir) {
  const std::filesystem::path file = task_dir / task.model.path;
  VT_ASSIGN_OR_RETURN(Bytes bytes, read_file(file, std::uint64_t{16} << 30));
  const std::string actual = hex_encode(sha256(bytes));
  if (actual != task.model.sha256) {
    return invalid_input("model.sha256: " + file.string() + " hashes to " + actual +
                         ", the task pins " + task.model.sha256);
  }
  torch::jit::Module module;
  try {
    std::istringstream in(std::string(bytes.begin(), bytes.end()));
    module = torch::jit::load(in);
  } catch (const c10::Error& e) {
    return invalid_input(file.string() + ": not a TorchScript module (" +
                         e.what_without_backtrace() + ")");
  } catch (const std::exception& e) {
    // An archive whose code/ does not compile throws torch::jit::ErrorReport, not a c10::Error;
    // it is the requestor's bad file all the same.
    return invalid_input(file.string() + ": not a TorchScript module (" + e.what() + ")");
  }
  if (!module.find_method("forward")) {
    return invalid_input(file.string() + ": the TorchScript module has no forward(x) method");
  }
  VT_RETURN_IF_ERROR(check_no_mutable_attributes(module, file.string()));
  for (const auto& p : module.parameters(true)) p.set_requires_grad(true);
  if (task.determinism != Determinism::kPortable) {
    return std::unique_ptr<Network>(std::make_unique<ScriptNetwork>(module, nullptr, module));
  }
  torch::jit::Module run = module.clone(/*inplace=*/true);
  VT_RETURN_IF_ERROR(make_portable(run, file.string()));
  return std::unique_ptr<Network>(
      std::make_unique<ScriptNetwork>(module, portable_ops(task.seed), run));
}

}  // namespace vt::training

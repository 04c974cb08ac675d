// TorchScript modules in portable arithmetic: the operators of their forward graph rewritten to
// veritrain's own (veritrain::*, script/operators.cpp), every other operator checked to round
// nothing or one IEEE operation per element (docs/portable.md, "TorchScript modules").
#include "training/script/rewrite.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/jit.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "training/script/op_table.h"

namespace vt::training {
namespace {

// Operators of inference fast paths that training never takes: a prim::If whose one branch runs
// one of them and whose other does not takes the other (docs/portable.md, "TorchScript
// modules"); the module computes the same there, in operators that have portable kernels.
const std::set<std::string> kFastPaths = {"aten::_transformer_encoder_layer_fwd",
                                          "aten::_native_multi_head_attention",
                                          "aten::_nested_tensor_from_mask",
                                          "aten::_nested_tensor_from_mask_left_aligned",
                                          "aten::to_padded_tensor",
                                          "aten::_masked_softmax"};

bool touches_tensors(const torch::jit::Node* n) {
  const auto tensor = [](const torch::jit::Value* v) {
    return v->type()->kind() == c10::TypeKind::TensorType;
  };
  return std::ranges::any_of(n->inputs(), tensor) || std::ranges::any_of(n->outputs(), tensor);
}

// What keeps an operator from being exact: an alpha other than 1 (a product rounded before the
// sum; `own_alpha`: the kernel takes it instead), a rounding mode LibTorch applies (`rewritten`:
// veritrain's operator applies it), pow at an exponent LibTorch leaves to the CPU.
std::string exact_caveat(const torch::jit::Node* n, bool own_alpha = false,
                         bool rewritten = false) {
  const c10::FunctionSchema* schema = n->maybeSchema();
  if (schema == nullptr) return "";
  // LibTorch's pow is products, sqrt or a division at these exponents, and its gradient's
  // pow(x, e - 1) is one of them too; at any other it is the CPU's own pow (a number exponent
  // is decompositions.py's pow instead).
  if (n->kind() == c10::Symbol::fromQualString("aten::pow")) {
    std::string refused =
        "with a tensor exponent (LibTorch's general pow rounds differently on each CPU; a "
        "number exponent is portable)";
    if (schema->overload_name() != "Tensor_Scalar") return refused;
    const auto exponent = torch::jit::toIValue(n->input(1));
    if (!exponent || !(exponent->isDouble() || exponent->isInt())) return refused;
    const double e = exponent->toScalar().toDouble();
    return e == 2.0 || e == 3.0 || e == 0.5 || e == -1.0 ? "" : refused;
  }
  // A video model's global pool: to 1 × 1 × 1, the spatial mean (F.adaptive_avg_pool3d passes
  // its size through list_with_default, and lists stay unfolded: a ListConstruct of ones).
  if (n->kind() == c10::Symbol::fromQualString("aten::adaptive_avg_pool3d")) {
    const torch::jit::Value* size = n->input(1);
    if (size->node()->kind() == c10::Symbol::fromQualString("aten::list_with_default"))
      size = size->node()->input(0);
    const auto is_one = [](const torch::jit::Value* v) {
      const auto value = torch::jit::toIValue(v);
      return value && value->isInt() && value->toInt() == 1;
    };
    bool ones = false;
    if (const auto value = torch::jit::toIValue(size); value && value->isIntList()) {
      const std::vector<std::int64_t> sizes = value->toIntVector();
      ones = std::all_of(sizes.begin(), sizes.end(), [](std::int64_t s) { return s == 1; });
    } else if (size->node()->kind() == c10::prim::ListConstruct) {
      ones = std::all_of(size->node()->inputs().begin(), size->node()->inputs().end(), is_one);
    }
    return ones ? "" : "to an output other than 1 × 1 × 1";
  }
  if (!rewritten && schema->overload_name().find("mode") != std::string::npos)
    return "with a rounding mode";
  const auto alpha = schema->argumentIndexWithName("alpha");
  if (!alpha || own_alpha) return "";
  const auto value = torch::jit::toIValue(n->input(*alpha));
  if (!value || !value->isScalar() || value->toScalar().toDouble() != 1.0) return "with alpha ≠ 1";
  return "";
}

std::string overload_of(const torch::jit::Node* n) {
  const c10::FunctionSchema* schema = n->maybeSchema();
  return schema != nullptr ? schema->overload_name() : "";
}

// The node's name as a reader finds it in the module's code, and where: "aten::lgamma
// (model.py:12: `return self.fc(torch.lgamma(x))`)" from the source ranges the archive keeps
// (the requestor's own file where it kept them, else its serialized code).
std::string describe(const torch::jit::Node* n) {
  const std::string overload = overload_of(n);
  std::string out =
      std::string(n->kind().toQualString()) + (overload.empty() ? "" : "." + overload);
  torch::jit::SourceRange range = n->sourceRange();
  if (auto original = range.findSourceRangeThatGenerated()) range = *original;
  const auto at = range.file_line_col();
  const auto source = range.source();
  if (!at || source == nullptr) return out;
  const std::string text = source->text_str().str();
  const std::size_t from = std::min(range.start(), text.size());
  const std::size_t begin = text.rfind('\n', from == 0 ? 0 : from - 1);
  const std::size_t first = begin == std::string::npos || from == 0 ? 0 : begin + 1;
  std::string line = text.substr(first, text.find('\n', from) - first);
  line.erase(0, line.find_first_not_of(" \t"));
  if (line.size() > 80) line = line.substr(0, 77) + "...";
  return out + " (" + std::get<0>(*at) + ":" + std::to_string(std::get<1>(*at)) + ": `" + line +
         "`)";
}

bool runs_fast_path(torch::jit::Block* block) {
  for (torch::jit::Node* n : block->nodes()) {
    if (kFastPaths.count(n->kind().toQualString())) return true;
    for (torch::jit::Block* inner : n->blocks()) {
      if (runs_fast_path(inner)) return true;
    }
  }
  return false;
}

// Replaces each prim::If that chooses between an inference fast path and the path training
// takes by the latter: its nodes moved before the If, the If's outputs by that block's, and its
// condition by the constant that selects that block everywhere it is read (an early `return`
// inside the fast path leaves a "did return" flag computed from the same condition).
void take_training_paths(torch::jit::Graph& graph, torch::jit::Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    torch::jit::Node* n = *it;
    ++it;
    for (torch::jit::Block* inner : n->blocks()) take_training_paths(graph, inner);
    if (n->kind() != c10::prim::If) continue;
    const bool fast_then = runs_fast_path(n->blocks()[0]);
    const bool fast_else = runs_fast_path(n->blocks()[1]);
    if (fast_then == fast_else) continue;
    {
      // At the graph's start, which comes before every use of the condition.
      const torch::jit::WithInsertPoint at(graph.block()->nodes().front());
      n->input(0)->replaceAllUsesWith(graph.insertConstant(!fast_then));
    }
    torch::jit::Block* kept = n->blocks()[fast_then ? 1 : 0];
    for (auto inner = kept->nodes().begin(); inner != kept->nodes().end();) {
      torch::jit::Node* moved = *inner;
      ++inner;
      moved->moveBefore(n);
    }
    for (std::size_t i = 0; i < n->outputs().size(); ++i)
      n->outputs()[i]->replaceAllUsesWith(kept->outputs()[i]);
    n->destroy();
  }
}

// Lookups in a dict or list attribute of the module with a constant key (torchvision's
// IntermediateLayerGetter: `if name in self.return_layers: out[self.return_layers[name]] = x`,
// once for every child) replaced by what they find, so that the branches they guard fold: the
// loader refuses a module that changes such an attribute (docs/models.md), and a branch never
// taken must not keep a tensor "used again" (relu_ in place after a layer whose output a
// dropped branch would have stored).
void read_container_attributes(const torch::jit::Module& module, torch::jit::Graph& graph) {
  std::map<const torch::jit::Value*, c10::IValue> objects{{graph.inputs()[0], module._ivalue()}};
  std::vector<torch::jit::Node*> lookups;
  for (torch::jit::Node* n : graph.nodes()) {
    if (n->kind() != c10::prim::GetAttr) continue;
    const auto owner = objects.find(n->input(0));
    if (owner == objects.end() || !owner->second.isObject()) continue;
    const auto object = owner->second.toObject();
    const std::string name = n->s(c10::attr::name);
    if (!object->type()->hasAttribute(name)) continue;
    const c10::IValue value = object->getAttr(name);
    objects.emplace(n->output(), value);
    if (!value.isGenericDict() && !value.isList()) continue;
    for (const torch::jit::Use& use : n->output()->uses()) lookups.push_back(use.user);
  }
  for (torch::jit::Node* lookup : lookups) {
    const std::string kind = lookup->kind().toQualString();
    if ((kind != "aten::__contains__" && kind != "aten::__getitem__") ||
        lookup->inputs().size() != 2 || lookup->outputs().size() != 1)
      continue;
    const c10::IValue& container = objects.at(lookup->input(0));
    const auto key = torch::jit::toIValue(lookup->input(1));
    if (!key) continue;
    c10::optional<c10::IValue> found;
    if (container.isGenericDict()) {
      const c10::Dict<c10::IValue, c10::IValue> dict = container.toGenericDict();
      const auto at = dict.find(*key);
      if (kind == "aten::__contains__") {
        found = c10::IValue(at != dict.end());
      } else if (at != dict.end()) {
        found = at->value();
      }
    } else if (kind == "aten::__getitem__" && key->isInt()) {
      const c10::List<c10::IValue> list = container.toList();
      const int64_t i =
          key->toInt() < 0 ? key->toInt() + static_cast<int64_t>(list.size()) : key->toInt();
      if (i >= 0 && i < static_cast<int64_t>(list.size())) found = list.get(i);
    }
    if (!found || found->isTensor() || found->isObject()) continue;
    const torch::jit::WithInsertPoint at(lookup);
    const auto constant = graph.insertConstant(*found);
    constant->setType(lookup->output()->type());
    lookup->output()->replaceAllUsesWith(constant);
  }
}

// --- decompositions (decompositions.py) -------------------------------------------------------

const torch::jit::CompilationUnit& decompositions() {
  // Compiled once, on the first module that calls one.
  static const std::shared_ptr<torch::jit::CompilationUnit> unit =
      torch::jit::compile(std::string(decomposition_source()));
  return *unit;
}

const PortableOp* decomposition_of(const torch::jit::Node* n) {
  const std::string kind = n->kind().toQualString();
  const std::string overload = overload_of(n);
  // pow at 2, 3, 0.5 and -1 stays LibTorch's exact operation (its committed bits).
  if (kind == "aten::pow" && exact_caveat(n).empty()) return nullptr;
  for (const PortableOp& op : portable_ops()) {
    if (op.form == OpForm::kDecomposition && op.aten == kind && op.overload == overload) return &op;
  }
  return nullptr;
}

// The nodes with a decomposition, each with its entry.
using Decomposed = std::vector<std::pair<torch::jit::Node*, const PortableOp*>>;
void decomposed_nodes(torch::jit::Block* block, Decomposed& out) {
  for (torch::jit::Node* n : block->nodes()) {
    for (torch::jit::Block* inner : n->blocks()) decomposed_nodes(inner, out);
    if (const PortableOp* op = decomposition_of(n)) out.emplace_back(n, op);
  }
}

// A constant argument as the function's parameter takes it: a Scalar (int) where it says float.
c10::IValue as_parameter(c10::IValue value, const c10::TypePtr& parameter) {
  c10::TypePtr type = parameter;
  if (const auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
  if (type->kind() == c10::TypeKind::FloatType && value.isInt())
    return static_cast<double>(value.toInt());
  return value;
}

// The function of `op` specialised to n's constant arguments and folded: what is left to insert,
// or the message of a check that fails for these arguments (a raise the folding left standing).
Result<std::shared_ptr<torch::jit::Graph>> specialised(const PortableOp& op, torch::jit::Node* n) {
  std::shared_ptr<torch::jit::Graph> callee =
      torch::jit::toGraphFunction(decompositions().get_function(std::string(op.ours)))
          .graph()
          ->copy();
  torch::jit::Inline(*callee);
  if (callee->inputs().size() != n->inputs().size()) {
    return internal_error("decompositions.py: " + std::string(op.ours) + " takes " +
                          std::to_string(callee->inputs().size()) + " arguments, " +
                          std::string(op.aten) + " " + std::to_string(n->inputs().size()));
  }
  {
    const torch::jit::WithInsertPoint at(callee->block()->nodes().front());
    for (std::size_t i = 0; i < n->inputs().size(); ++i) {
      if (const auto value = torch::jit::toIValue(n->input(i))) {
        torch::jit::Value* parameter = callee->inputs()[i];
        parameter->replaceAllUsesWith(
            callee->insertConstant(as_parameter(*value, parameter->type())));
      }
    }
  }
  torch::jit::ConstantPropagationImmutableTypes(callee);
  torch::jit::EliminateDeadCode(callee);
  for (torch::jit::Node* inner : callee->block()->nodes()) {
    if (inner->kind() != c10::prim::RaiseException) continue;
    const auto message = torch::jit::toIValue(inner->input(0));
    return invalid_input(message && message->isString() ? message->toStringRef()
                                                        : "a check of its decomposition fails");
  }
  return callee;
}

// Inlines, where the forward calls an operator with a decomposition, its function (again while
// the functions call operators that have one), each refused at once where its checks fail for
// the arguments it is given; non-constant Scalar arguments become floats where the function
// takes them so.
void decompose(torch::jit::Graph& graph, std::map<std::string, std::string>& refused) {
  for (int depth = 0; depth < 4; ++depth) {
    Decomposed nodes;
    decomposed_nodes(graph.block(), nodes);
    if (nodes.empty()) return;
    for (const auto& [n, op] : nodes) {
      auto callee = specialised(*op, n);
      if (!callee.ok()) {
        refused.emplace(describe(n), callee.error().message);
        continue;
      }
      const torch::jit::WithInsertPoint at(n);
      std::vector<torch::jit::Value*> inputs;
      for (std::size_t i = 0; i < n->inputs().size(); ++i) {
        torch::jit::Value* v = n->input(i);
        const c10::TypePtr want = (*callee)->inputs()[i]->type();
        const bool to_float = want->kind() == c10::TypeKind::FloatType &&
                              (v->type()->kind() == c10::TypeKind::IntType ||
                               v->type()->kind() == c10::TypeKind::NumberType);
        inputs.push_back(to_float ? graph.insert(c10::Symbol::fromQualString("aten::Float"), {v})
                                  : v);
      }
      std::vector<torch::jit::Value*> outs = torch::jit::insertGraph(graph, **callee, inputs);
      if (n->outputs().size() > 1 && outs.size() == 1)  // a tuple the function returns
        outs = graph.insertNode(graph.createTupleUnpack(outs[0]))->outputs().vec();
      for (std::size_t i = 0; i < n->outputs().size(); ++i)
        n->outputs()[i]->replaceAllUsesWith(outs[i]);
      n->destroy();
    }
    if (!refused.empty()) return;
  }
}

// The nodes to rewrite, each with the operator it becomes, and the operators refused.
using Rewrites = std::vector<std::pair<torch::jit::Node*, std::string>>;
void collect(torch::jit::Block* block, Rewrites& rewrite,
             std::map<std::string, std::string>& refused) {
  for (torch::jit::Node* n : block->nodes()) {
    for (torch::jit::Block* inner : n->blocks()) collect(inner, rewrite, refused);
    const std::string kind = n->kind().toQualString();
    if (kind.rfind("prim::", 0) == 0 || !touches_tensors(n)) continue;
    const std::string overload = overload_of(n);
    // The entry rewriting this overload, LibTorch's own entry for the operator, and whether an
    // in-place entry names another of its overloads (then this one is refused).
    const PortableOp* ours = nullptr;
    const PortableOp* libtorch = nullptr;
    bool other_in_place = false;
    for (const PortableOp& op : portable_ops()) {
      if (op.aten != kind || op.form == OpForm::kDecomposition) continue;
      if (op.form == OpForm::kExact || op.form == OpForm::kMove) {
        libtorch = &op;
      } else if (op.overload == overload) {
        ours = &op;
      } else {
        other_in_place = other_in_place || op.form == OpForm::kInPlace;
      }
    }
    if (ours != nullptr && ours->form == OpForm::kInPlace) {
      if (n->input(0)->uses().size() > 1) {
        refused.emplace(describe(n), "in place on a tensor used again");
      } else {
        rewrite.emplace_back(n, "veritrain::" + std::string(ours->ours));
      }
    } else if (ours != nullptr) {
      if (const std::string caveat = exact_caveat(n, ours->own_alpha, true); !caveat.empty()) {
        refused.emplace(describe(n), caveat);
      } else {
        rewrite.emplace_back(n, "veritrain::" + std::string(ours->ours));
      }
    } else if (other_in_place || libtorch == nullptr) {
      refused.emplace(describe(n), "");
    } else if (const std::string caveat = exact_caveat(n); !caveat.empty()) {
      refused.emplace(describe(n), caveat);
    }
  }
}

}  // namespace

Status make_portable(torch::jit::Module& module, const std::string& file) {
  std::shared_ptr<torch::jit::Graph> graph =
      torch::jit::toGraphFunction(module.get_method("forward").function()).graph();
  torch::jit::Inline(*graph);
  read_container_attributes(module, *graph);
  // Branches on constants (F.relu's `if inplace`) folded away, so that only the operators that
  // can run are judged. Tensors are never folded: that would be LibTorch's arithmetic.
  torch::jit::ConstantPropagationImmutableTypes(graph);
  take_training_paths(*graph, graph->block());
  torch::jit::EliminateDeadCode(graph);
  Rewrites rewrite;
  std::map<std::string, std::string> refused;
  decompose(*graph, refused);
  // What the decompositions brought, folded as the module's own operators were.
  torch::jit::ConstantPropagationImmutableTypes(graph);
  torch::jit::EliminateDeadCode(graph);
  collect(graph->block(), rewrite, refused);
  if (refused.empty()) {
    for (const auto& [n, ours] : rewrite) {
      torch::jit::Node* replacement =
          graph->create(c10::Symbol::fromQualString(ours), n->inputs(), n->outputs().size());
      replacement->insertBefore(n);
      for (std::size_t i = 0; i < n->outputs().size(); ++i) {
        replacement->outputs()[i]->setType(n->outputs()[i]->type());
        n->outputs()[i]->replaceAllUsesWith(replacement->outputs()[i]);
      }
      n->destroy();
    }
    return {};
  }
  std::string names;
  for (const auto& [name, caveat] : refused)
    names += (names.empty() ? "" : ", ") + name + (caveat.empty() ? "" : " (" + caveat + ")");
  // The first line is the finding (task init's exact-mode fallback quotes it alone); the
  // second what to do.
  return invalid_input(file + ": no portable kernel for " + names +
                       "\n  docs/portable.md (\"TorchScript modules\") lists the operators that "
                       "have one: write the module with those, or train it with determinism "
                       "exact or tolerance");
}

}  // namespace vt::training

#include "training/script/einsum_plan.h"

#include <initializer_list>
#include <map>
#include <string>

namespace vt::training {
namespace {

bool is_subscript(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Where subscript c stands in `term`, or -1.
std::int64_t position(const std::string& term, char c) {
  const auto at = term.find(c);
  return at == std::string::npos ? -1 : static_cast<std::int64_t>(at);
}

std::string quoted(char c) {
  std::string q(3, '\'');
  q[1] = c;
  return q;
}

// What remains of `term` without the dimensions summed away, and those dimensions.
std::string unsummed(const std::string& term, const std::string& keep,
                     std::vector<std::int64_t>& summed) {
  std::string rest;
  for (std::size_t d = 0; d < term.size(); ++d) {
    if (keep.find(term[d]) == std::string::npos) {
      summed.push_back(static_cast<std::int64_t>(d));
    } else {
      rest += term[d];
    }
  }
  return rest;
}

}  // namespace

Result<EinsumPlan> plan_einsum(std::string_view equation,
                               const std::vector<std::vector<std::int64_t>>& shapes) {
  std::string text;
  for (const char c : equation)
    if (c != ' ') text += c;
  const auto arrow = text.find("->");
  const std::string inputs = text.substr(0, arrow);
  std::vector<std::string> terms(1);
  for (const char c : inputs) {
    if (c == ',') {
      terms.emplace_back();
    } else if (c == '.') {
      return invalid_input("an ellipsis (...): name every dimension");
    } else if (!is_subscript(c)) {
      return invalid_input(quoted(c) + " is not a subscript (a-z, A-Z)");
    } else {
      terms.back() += c;
    }
  }
  if (terms.size() != shapes.size())
    return invalid_input(std::to_string(terms.size()) + " terms for " +
                         std::to_string(shapes.size()) + " operands");
  if (terms.size() > 2)
    return invalid_input(std::to_string(terms.size()) +
                         " operands: write it as einsums of two (the order of the contractions "
                         "decides the rounding)");
  std::map<char, std::int64_t> size_of, count;
  for (std::size_t t = 0; t < terms.size(); ++t) {
    const std::string& term = terms[t];
    if (term.size() != shapes[t].size())
      return invalid_input("operand " + std::to_string(t + 1) + " has " +
                           std::to_string(shapes[t].size()) + " dimensions, '" + term + "' names " +
                           std::to_string(term.size()));
    for (std::size_t d = 0; d < term.size(); ++d) {
      const char c = term[d];
      if (term.find(c) != d)
        return invalid_input(quoted(c) + " twice in operand " + std::to_string(t + 1) +
                             " (a diagonal)");
      const auto [it, fresh] = size_of.emplace(c, shapes[t][d]);
      if (!fresh && it->second != shapes[t][d])
        return invalid_input(quoted(c) + " is " + std::to_string(it->second) + " and " +
                             std::to_string(shapes[t][d]) + " long (no broadcasting)");
      ++count[c];
    }
  }
  std::string out;
  if (arrow == std::string::npos) {
    // PyTorch's implicit output: the subscripts named once, in alphabetical order (A-Z, a-z).
    for (const auto& [c, n] : count)
      if (n == 1) out += c;
  } else {
    out = text.substr(arrow + 2);
    for (std::size_t i = 0; i < out.size(); ++i) {
      const char c = out[i];
      if (!is_subscript(c)) return invalid_input(quoted(c) + " in the output is not a subscript");
      if (out.find(c) != i) return invalid_input(quoted(c) + " twice in the output");
      if (!size_of.contains(c)) return invalid_input(quoted(c) + " of the output names no input");
    }
  }

  EinsumPlan plan;
  plan.operands = terms.size();
  const std::string& a = terms[0];
  const std::string b = terms.size() == 2 ? terms[1] : std::string();
  const std::string ra = unsummed(a, out + b, plan.a_sum);
  if (plan.operands == 1) {
    for (const char c : out) plan.out_perm.push_back(position(ra, c));
    return plan;
  }
  const std::string rb = unsummed(b, out + a, plan.b_sum);
  std::string batch, left, contracted, right;
  for (const char c : out) {
    const bool in_a = ra.find(c) != std::string::npos, in_b = rb.find(c) != std::string::npos;
    (in_a && in_b ? batch : in_a ? left : right) += c;
  }
  for (const char c : ra)
    if (rb.find(c) != std::string::npos && out.find(c) == std::string::npos) contracted += c;
  plan.batch = batch.size(), plan.left = left.size();
  plan.contracted = contracted.size(), plan.right = right.size();
  for (const std::string* group : {&batch, &left, &contracted})
    for (const char c : *group) plan.a_perm.push_back(position(ra, c));
  for (const std::string* group : {&batch, &contracted, &right})
    for (const char c : *group) plan.b_perm.push_back(position(rb, c));
  const std::string product = batch + left + right;
  for (const char c : out) plan.out_perm.push_back(position(product, c));
  return plan;
}

}  // namespace vt::training

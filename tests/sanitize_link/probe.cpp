// Reaches c10::Type::castRaw<c10::DynamicType> through DictType::create, as the JIT's operator
// registration does.
#include <torch/csrc/jit/ir/ir.h>
#include <torch/script.h>
int main(int argc, char**) {
  auto dict = c10::DictType::create(c10::StringType::get(), c10::TensorType::get());
  return argc > 5 ? static_cast<int>(dict->containedTypeSize()) : 0;
}

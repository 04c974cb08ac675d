// Reaches c10::Type::castRaw<c10::DynamicType> through DictType::create, as the JIT's operator
// registration does. Only the header that declares it: the JIT's whole headers (torch/script.h)
// reach the same inline code and took three times as long to compile under the sanitizers.
#include <ATen/core/jit_type.h>
int main(int argc, char**) {
  auto dict = c10::DictType::create(c10::StringType::get(), c10::TensorType::get());
  return argc > 5 ? static_cast<int>(dict->containedTypeSize()) : 0;
}

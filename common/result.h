#pragma once
// Errors are values across module edges (leveldb's Status, in the shape of std::expected).
// Debian 12 ships no tl::expected and GCC 12 has no std::expected, so this is the small
// subset the project uses. An Error carries the exit-code class that the CLI maps to
// (docs/cli.md) and a message that names what was wrong and where.

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace vt {

enum class Errc {
  kRejected = 1,      // verification failed: the input is well-formed but wrong
  kInvalidInput = 2,  // usage error, malformed file, bad field
  kIo = 3,            // file system or network failure
  kInternal = 4,      // a bug in veritrain
};

struct Error {
  Errc code = Errc::kInternal;
  std::string message;

  // Prefixes the message with where it happened: "reading log.bin: " + message.
  Error context(std::string_view where) const {
    return Error{code, std::string(where) + ": " + message};
  }
};

inline Error rejected(std::string message) { return {Errc::kRejected, std::move(message)}; }
inline Error invalid_input(std::string message) {
  return {Errc::kInvalidInput, std::move(message)};
}
inline Error io_error(std::string message) { return {Errc::kIo, std::move(message)}; }
inline Error internal_error(std::string message) { return {Errc::kInternal, std::move(message)}; }

inline int exit_code(Errc code) { return static_cast<int>(code); }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}      // NOLINT: implicit
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT: implicit

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(state_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<1>(state_);
  }

 private:
  std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace vt

#define VT_CONCAT_INNER(a, b) a##b
#define VT_CONCAT(a, b) VT_CONCAT_INNER(a, b)

// Returns the error of `expr` from the enclosing function.
#define VT_RETURN_IF_ERROR(expr)                     \
  do {                                               \
    auto vt_status_ = (expr);                        \
    if (!vt_status_.ok()) return vt_status_.error(); \
  } while (0)

// `VT_ASSIGN_OR_RETURN(auto x, f());` binds the value or returns the error. __COUNTER__, not
// __LINE__: GCC gives __LINE__ different values inside one invocation that spans lines.
#define VT_ASSIGN_OR_RETURN(lhs, expr) \
  VT_ASSIGN_OR_RETURN_IMPL(VT_CONCAT(vt_result_, __COUNTER__), lhs, expr)
#define VT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.error();             \
  lhs = std::move(tmp).value()

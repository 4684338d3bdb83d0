// Result<T>: the error tier for everything a peer, the network, a file or a user can cause.
//
// A function that can fail because of input it does not control returns Result<T>: either a
// value or an Error{code, message, peer}. It never throws for such input and never asserts on it.
// Invariants of our own code use the BALLOT_ENFORCE macros of core/enforce.h instead.
// See docs/errors.md for the two tiers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace ballot {

// Stable codes: tools and tests branch on them, people read the message.
enum class ErrorCode : std::uint8_t {
  kInvalidArgument,  // a caller- or user-supplied value is out of its documented domain
  kPrecondition,     // a documented bound does not hold (e.g. Krum needs n >= 2f + 3)
  kMalformed,        // bytes that do not parse: truncated, bad magic, bad length, bad index
  kLimitExceeded,    // a length or count above a configured limit
  kAuthentication,   // a bad signature, certificate or identity
  kReplay,           // an old round or an already-seen sequence number
  kTimeout,          // a deadline passed
  kIo,               // the operating system or the network failed
  kNotFound,         // a file, key or peer that should exist does not
  kUnavailable,      // a feature not built in (e.g. CUDA) or no device present
  kInternal,         // a bug of ours, reported instead of crashing a long-running process
};

// A short lowercase name for the code ("malformed"), for logs and reports.
const char* error_code_name(ErrorCode code) noexcept;

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  std::optional<std::uint32_t> peer;  // the node id that caused it, when a peer did

  // "malformed: frame length 9000000 exceeds limit 4194304 (peer 3)"
  std::string to_string() const;
};

inline Error make_error(ErrorCode code, std::string message, std::optional<std::uint32_t> peer = std::nullopt) {
  return Error{code, std::move(message), peer};
}

// Either a T or an Error. Checked access: value() on an error is a bug of the caller and
// aborts through BALLOT_ENFORCE semantics (it throws ballot::EnforceError).
template <typename T>
class [[nodiscard]] Result {
 public:
  static_assert(!std::is_same_v<std::remove_cv_t<T>, Error>, "Result<Error> is ambiguous");

  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}      // NOLINT: implicit
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT: implicit

  bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & {
    check_value();
    return std::get<0>(state_);
  }
  const T& value() const& {
    check_value();
    return std::get<0>(state_);
  }
  T&& value() && {
    check_value();
    return std::get<0>(std::move(state_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const& {
    check_error();
    return std::get<1>(state_);
  }
  Error&& error() && {
    check_error();
    return std::get<1>(std::move(state_));
  }

  template <typename U>
  T value_or(U&& fallback) const& {
    return ok() ? std::get<0>(state_) : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  void check_value() const;
  void check_error() const;
  std::variant<T, Error> state_;
};

// Result<void>: success or an Error.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}  // NOLINT: implicit

  bool ok() const noexcept { return !error_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  void value() const;
  const Error& error() const&;
  Error&& error() &&;

 private:
  std::optional<Error> error_;
};

using Status = Result<void>;

namespace detail {
[[noreturn]] void throw_bad_result_access(const char* what, const Error* error);
}  // namespace detail

template <typename T>
void Result<T>::check_value() const {
  if (!ok()) detail::throw_bad_result_access("value() of a Result holding an error", &std::get<1>(state_));
}
template <typename T>
void Result<T>::check_error() const {
  if (ok()) detail::throw_bad_result_access("error() of a Result holding a value", nullptr);
}

}  // namespace ballot

// Propagates an error: `BALLOT_TRY(status_expr);` returns the Error from the enclosing function.
#define BALLOT_TRY(expr)                                                        \
  do {                                                                          \
    auto ballot_try_result_ = (expr);                                           \
    if (!ballot_try_result_.ok()) return std::move(ballot_try_result_).error(); \
  } while (false)

#define BALLOT_CONCAT_INNER_(a, b) a##b
#define BALLOT_CONCAT_(a, b) BALLOT_CONCAT_INNER_(a, b)
// `BALLOT_ASSIGN_OR_RETURN(auto x, result_expr);` binds the value or returns the Error.
#define BALLOT_ASSIGN_OR_RETURN(lhs, expr)                              \
  auto BALLOT_CONCAT_(ballot_result_, __LINE__) = (expr);               \
  if (!BALLOT_CONCAT_(ballot_result_, __LINE__).ok())                   \
    return std::move(BALLOT_CONCAT_(ballot_result_, __LINE__)).error(); \
  lhs = std::move(BALLOT_CONCAT_(ballot_result_, __LINE__)).value()

// BALLOT_ENFORCE*: the invariant tier. A failed check is a bug in Ballot's own code (or a caller
// breaking a documented precondition of a library function), never a consequence of peer input.
// It throws ballot::EnforceError whose message names the expression, both operands and the place.
// Bytes from a peer, a file or a user are validated into Result<T> instead (core/result.h).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace ballot {

class EnforceError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
[[noreturn]] void enforce_failed(const char* file, int line, const char* expression, const std::string& detail);

// Character types print as numbers: a uint8_t label of 12 is "12", not a control character.
template <typename T>
decltype(auto) printable(const T& value) {
  if constexpr (std::is_same_v<T, char> || std::is_same_v<T, signed char> || std::is_same_v<T, unsigned char>) {
    return +value;
  } else {
    return (value);
  }
}

template <typename A, typename B>
[[noreturn]] void enforce_compare_failed(const char* file, int line, const char* expression, const A& a, const B& b) {
  std::ostringstream out;
  out << "left = " << printable(a) << ", right = " << printable(b);
  enforce_failed(file, line, expression, out.str());
}
}  // namespace detail
}  // namespace ballot

#define BALLOT_ENFORCE(cond, ...)                                                                         \
  do {                                                                                                    \
    if (!(cond)) ::ballot::detail::enforce_failed(__FILE__, __LINE__, #cond, ::std::string{__VA_ARGS__}); \
  } while (false)

#define BALLOT_ENFORCE_OP_(a, b, op)                                                                         \
  do {                                                                                                       \
    const auto& ballot_a_ = (a);                                                                             \
    const auto& ballot_b_ = (b);                                                                             \
    if (!(ballot_a_ op ballot_b_))                                                                           \
      ::ballot::detail::enforce_compare_failed(__FILE__, __LINE__, #a " " #op " " #b, ballot_a_, ballot_b_); \
  } while (false)

#define BALLOT_ENFORCE_EQ(a, b) BALLOT_ENFORCE_OP_(a, b, ==)
#define BALLOT_ENFORCE_NE(a, b) BALLOT_ENFORCE_OP_(a, b, !=)
#define BALLOT_ENFORCE_LT(a, b) BALLOT_ENFORCE_OP_(a, b, <)
#define BALLOT_ENFORCE_LE(a, b) BALLOT_ENFORCE_OP_(a, b, <=)
#define BALLOT_ENFORCE_GT(a, b) BALLOT_ENFORCE_OP_(a, b, >)
#define BALLOT_ENFORCE_GE(a, b) BALLOT_ENFORCE_OP_(a, b, >=)

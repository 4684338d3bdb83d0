#include "core/result.h"

#include "core/enforce.h"

namespace ballot {

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kPrecondition:
      return "precondition";
    case ErrorCode::kMalformed:
      return "malformed";
    case ErrorCode::kLimitExceeded:
      return "limit exceeded";
    case ErrorCode::kAuthentication:
      return "authentication";
    case ErrorCode::kReplay:
      return "replay";
    case ErrorCode::kTimeout:
      return "timeout";
    case ErrorCode::kIo:
      return "i/o";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "unknown";
}

std::string Error::to_string() const {
  std::string text = error_code_name(code);
  text += ": ";
  text += message;
  if (peer) text += " (peer " + std::to_string(*peer) + ")";
  return text;
}

void Result<void>::value() const {
  if (!ok()) detail::throw_bad_result_access("value() of a Result holding an error", &*error_);
}
const Error& Result<void>::error() const& {
  if (ok()) detail::throw_bad_result_access("error() of a Result holding a value", nullptr);
  return *error_;
}
Error&& Result<void>::error() && {
  if (ok()) detail::throw_bad_result_access("error() of a Result holding a value", nullptr);
  return std::move(*error_);
}

namespace detail {
void throw_bad_result_access(const char* what, const Error* error) {
  std::string message = what;
  if (error) message += ": " + error->to_string();
  throw EnforceError(message);
}

void enforce_failed(const char* file, int line, const char* expression, const std::string& detail) {
  std::string message = std::string(file) + ":" + std::to_string(line) + ": enforce failed: " + expression;
  if (!detail.empty()) message += " (" + detail + ")";
  throw EnforceError(message);
}
}  // namespace detail
}  // namespace ballot

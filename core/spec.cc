#include "core/spec.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace ballot {
namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\n");
  return text.substr(first, last - first + 1);
}

Error bad_spec(std::string_view text, const std::string& why) {
  return make_error(ErrorCode::kInvalidArgument, "bad spec '" + std::string(text) + "': " + why);
}

}  // namespace

Result<Spec> Spec::parse(std::string_view text) {
  const std::string_view whole = trim(text);
  Spec spec;
  const auto colon = whole.find(':');
  spec.name_ = std::string(trim(whole.substr(0, colon)));
  if (spec.name_.empty()) return bad_spec(text, "empty name");
  if (colon == std::string_view::npos) return spec;
  std::string_view rest = whole.substr(colon + 1);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (item.empty()) return bad_spec(text, "empty option");
    const auto equals = item.find('=');
    if (equals == std::string_view::npos) {
      return bad_spec(text, "option '" + std::string(item) + "' has no '='");
    }
    const std::string key(trim(item.substr(0, equals)));
    const std::string value(trim(item.substr(equals + 1)));
    if (key.empty()) return bad_spec(text, "option with an empty key");
    if (!spec.options_.emplace(key, value).second) return bad_spec(text, "duplicate option '" + key + "'");
  }
  return spec;
}

Result<std::vector<Spec>> Spec::parse_pipeline(std::string_view text) {
  std::vector<Spec> stages;
  std::string_view rest = text;
  while (true) {
    const auto arrow = rest.find('>');
    BALLOT_ASSIGN_OR_RETURN(Spec stage, parse(rest.substr(0, arrow)));
    stages.push_back(std::move(stage));
    if (arrow == std::string_view::npos) break;
    rest = rest.substr(arrow + 1);
  }
  return stages;
}

Result<std::int64_t> Spec::get_int(const std::string& key, std::int64_t fallback) const {
  const auto it = options_.find(key);
  if (it == options_.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno == ERANGE) {
    return bad_spec(to_string(), "option '" + key + "' needs an integer, got '" + it->second + "'");
  }
  return static_cast<std::int64_t>(value);
}

Result<double> Spec::get_double(const std::string& key, double fallback) const {
  const auto it = options_.find(key);
  if (it == options_.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value)) {
    return bad_spec(to_string(), "option '" + key + "' needs a finite number, got '" + it->second + "'");
  }
  return value;
}

Result<bool> Spec::get_bool(const std::string& key, bool fallback) const {
  const auto it = options_.find(key);
  if (it == options_.end()) return fallback;
  const std::string& v = it->second;
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  return bad_spec(to_string(), "option '" + key + "' needs 1/0, true/false or on/off, got '" + v + "'");
}

std::string Spec::get_string(const std::string& key, const std::string& fallback) const {
  const auto it = options_.find(key);
  return it == options_.end() ? fallback : it->second;
}

Status Spec::check_known(const std::set<std::string>& known) const {
  for (const auto& [key, value] : options_) {
    if (known.count(key) == 0) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return bad_spec(to_string(), "unknown option '" + key + "' (known: " + (list.empty() ? "none" : list) + ")");
    }
  }
  return {};
}

std::string format_number(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);  // shortest round trip
  return std::string(buffer, result.ptr);
}

std::string format_number(float value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, result.ptr);
  if (static_cast<float>(std::strtod(text.c_str(), nullptr)) == value || std::isnan(value)) return text;
  return format_number(static_cast<double>(value));
}

std::string Spec::to_string() const {
  std::string text = name_;
  char separator = ':';
  for (const auto& [key, value] : options_) {
    text += separator;
    text += key + "=" + value;
    separator = ',';
  }
  return text;
}

}  // namespace ballot

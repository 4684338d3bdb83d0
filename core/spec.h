// Spec: the one syntax for choosing a component by name with options, on the command line and in
// configuration files: "name" or "name:key=value,key=value". Registries (codecs, aggregation
// rules, attacks) parse their strings with it, so every one reports errors the same way.
// A pipeline is specs joined by '>' ("nnm:f=2 > krum:f=2"); whitespace around tokens is ignored.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace ballot {

class Spec {
 public:
  // Parses one spec. Errors (kInvalidArgument) name the offending text: empty name, a missing
  // '=', an empty key, a duplicate key.
  static Result<Spec> parse(std::string_view text);
  // Parses "a > b > c" into its stages, each a Spec.
  static Result<std::vector<Spec>> parse_pipeline(std::string_view text);

  const std::string& name() const noexcept { return name_; }
  const std::map<std::string, std::string>& options() const noexcept { return options_; }
  bool has(const std::string& key) const { return options_.count(key) != 0; }

  // Typed access with a default; a present but unparsable or out-of-range value is an error
  // naming the spec, the key and the value.
  Result<std::int64_t> get_int(const std::string& key, std::int64_t fallback) const;
  Result<double> get_double(const std::string& key, double fallback) const;
  Result<bool> get_bool(const std::string& key, bool fallback) const;  // 1/0, true/false, on/off
  std::string get_string(const std::string& key, const std::string& fallback) const;

  // Fails naming the first option not in `known`, so typos do not pass silently.
  Status check_known(const std::set<std::string>& known) const;

  // Canonical text: "name:key=value,..." with keys sorted.
  std::string to_string() const;

 private:
  std::string name_;
  std::map<std::string, std::string> options_;
};

// The shortest text that Spec::get_double reads back as exactly `value` ("0.1", "1e-07", "2.5"):
// how components print their numbers in spec(), so that a spec re-parses to the same component.
// The float overload prints the float's own shortest form ("0.8" for 0.8f) where reading it as a
// double and rounding to float gives `value` back, else the double's.
std::string format_number(double value);
std::string format_number(float value);

}  // namespace ballot

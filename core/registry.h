// The one idiom of Ballot's extension points (robust rules, pre-aggregators, codecs, attacks):
// a static table with one line per entry,
//
//   {"krum", "f threads", "krum", "Blanchard et al. 2017: the input nearest its n - f - 2 others",
//    &make<Krum>, {}},
//
// that everything else iterates: the registry (spec string -> object), the tests that must cover
// every entry (each one's `example` is built and exercised), the fuzzers, the benchmarks and the
// test that checks the docs list every name. Adding an entry is its source file, its test and one
// line in the table.
//
// Plain values; the tables are immutable after static initialisation (thread-safe to read).
#pragma once

#include <initializer_list>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/spec.h"

namespace ballot {

struct NoProperties {};

// One entry. `Factory` builds the object from a parsed Spec (its keys already checked against
// `keys`); `Properties` holds what is particular to the extension point (a codec's wire id, an
// attack's domain).
template <typename Factory, typename Properties = NoProperties>
struct TableEntry {
  std::string_view name;
  std::string_view keys;     // the option keys it accepts, space-separated
  std::string_view example;  // a valid spec of it, the one tests, fuzzers and benches use
  std::string_view summary;  // one line: what it computes, and the paper
  Factory make;
  Properties properties{};
};

// The entry named `name`, or null. Linear: tables have tens of entries.
template <typename Entry>
const Entry* find_entry(std::span<const Entry> table, std::string_view name) noexcept {
  for (const Entry& entry : table)
    if (entry.name == name) return &entry;
  return nullptr;
}

template <typename Entry>
std::vector<std::string> entry_names(std::span<const Entry> table) {
  std::vector<std::string> out;
  out.reserve(table.size());
  for (const Entry& entry : table) out.emplace_back(entry.name);
  return out;
}

// "a, b, c", for error messages.
template <typename Entry>
std::string joined_names(std::span<const Entry> table) {
  std::string out;
  for (const Entry& entry : table) {
    if (!out.empty()) out += ", ";
    out += entry.name;
  }
  return out;
}

// The space-separated `keys` of an entry as a set, plus `extra` (keys every entry accepts).
inline std::set<std::string> key_set(std::string_view keys, std::initializer_list<std::string_view> extra = {}) {
  std::set<std::string> out;
  for (std::string_view key : extra) out.emplace(key);
  std::size_t begin = 0;
  while (begin < keys.size()) {
    std::size_t end = keys.find(' ', begin);
    if (end == std::string_view::npos) end = keys.size();
    if (end > begin) out.emplace(keys.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

inline bool has_key(std::string_view keys, std::string_view key) { return key_set(keys).count(std::string(key)) > 0; }

}  // namespace ballot

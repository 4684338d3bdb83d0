// How deeply a JSON text nests arrays and objects, found by one scan without parsing.
//
// nlohmann::json parses any depth, but copying, comparing or printing the value recurses once per
// level: a 400 KB file of nested brackets overflows the stack. Every reader of JSON that did not
// come from this process (cluster files, grids, a checkpoint's run record, metrics rows) refuses a
// text nested deeper than kMaxJsonNesting before it parses it.
#pragma once

#include <cstddef>
#include <string_view>

namespace ballot {

inline constexpr std::size_t kMaxJsonNesting = 64;

// The deepest nesting of '[' and '{' outside strings, counted up to `limit` + 1 (the scan stops
// there). Not a validator: a text the parser refuses may get any answer.
std::size_t json_nesting(std::string_view text, std::size_t limit = kMaxJsonNesting);

// json_nesting(text) <= kMaxJsonNesting.
inline bool json_nesting_ok(std::string_view text) { return json_nesting(text) <= kMaxJsonNesting; }

}  // namespace ballot

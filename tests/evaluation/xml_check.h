// A minimal XML well-formedness check for the SVG tests: balanced, properly nested tags, one
// root element named `root`, attributes quoted, entities among the five predefined ones.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ballot::evaluation::testing {

// Empty when well-formed; otherwise what is wrong and where.
inline std::string xml_problem(std::string_view text, std::string_view root) {
  std::vector<std::string> open;
  std::size_t roots = 0;
  std::size_t i = 0;
  const auto fail = [&](const std::string& why) { return why + " at offset " + std::to_string(i); };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '&') {
      const auto end = text.find(';', i);
      if (end == std::string_view::npos) return fail("unterminated entity");
      const auto entity = text.substr(i, end - i + 1);
      if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;" && entity != "&apos;") {
        return fail("unknown entity " + std::string(entity));
      }
      i = end + 1;
      continue;
    }
    if (c == '>') return fail("stray '>'");
    if (c != '<') {
      if (open.empty() && c != '\n' && c != ' ') return fail("text outside the root");
      ++i;
      continue;
    }
    if (text.substr(i, 5) == "<?xml") {
      const auto end = text.find("?>", i);
      if (end == std::string_view::npos || i != 0) return fail("bad XML declaration");
      i = end + 2;
      continue;
    }
    const auto end = text.find('>', i);
    if (end == std::string_view::npos) return fail("unterminated tag");
    std::string_view tag = text.substr(i + 1, end - i - 1);
    // Quotes must balance inside the tag and no '<' may appear in it.
    std::size_t quotes = 0;
    for (char t : tag) {
      if (t == '"') ++quotes;
      if (t == '<') return fail("'<' inside a tag");
    }
    if (quotes % 2 != 0) return fail("unbalanced quotes");
    if (!tag.empty() && tag.front() == '/') {
      const std::string name(tag.substr(1));
      if (open.empty() || open.back() != name) return fail("closing </" + name + "> does not match");
      open.pop_back();
    } else {
      const bool self_closing = !tag.empty() && tag.back() == '/';
      const auto space = tag.find_first_of(" \n/");
      const std::string name(tag.substr(0, space));
      if (name.empty()) return fail("empty tag name");
      if (open.empty()) {
        ++roots;
        if (name != root) return fail("root element <" + name + ">");
      }
      if (!self_closing) open.push_back(name);
    }
    i = end + 1;
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  if (roots != 1) return std::to_string(roots) + " root elements";
  return {};
}

}  // namespace ballot::evaluation::testing

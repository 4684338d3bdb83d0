#include "core/registry.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace ballot {
namespace {

int make_one(const Spec&) { return 1; }
int make_two(const Spec&) { return 2; }

struct Colour {
  int wavelength = 0;
};

using Entry = TableEntry<int (*)(const Spec&), Colour>;
const Entry kTable[] = {
    {"red", "shade alpha", "red:shade=2", "the long wavelengths", &make_one, {700}},
    {"blue", "", "blue", "the short wavelengths", &make_two, {450}},
};

TEST(Registry, FindsEntriesByNameAndListsThemInTableOrder) {
  const std::span<const Entry> table(kTable);
  const Entry* red = find_entry(table, "red");
  ASSERT_NE(red, nullptr);
  EXPECT_EQ(red->properties.wavelength, 700);
  EXPECT_EQ(red->make(Spec::parse(red->example).value()), 1);
  EXPECT_EQ(find_entry(table, "green"), nullptr);
  EXPECT_EQ(find_entry(table, "Red"), nullptr);  // names are exact
  EXPECT_EQ(entry_names(table), (std::vector<std::string>{"red", "blue"}));
  EXPECT_EQ(joined_names(table), "red, blue");
  EXPECT_EQ(joined_names(std::span<const Entry>()), "");
}

TEST(Registry, KeysAreASpaceSeparatedSet) {
  EXPECT_EQ(key_set("shade alpha"), (std::set<std::string>{"alpha", "shade"}));
  EXPECT_EQ(key_set(""), std::set<std::string>{});
  EXPECT_EQ(key_set("  a  b "), (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(key_set("a", {"threads"}), (std::set<std::string>{"a", "threads"}));
  EXPECT_TRUE(has_key("shade alpha", "alpha"));
  EXPECT_FALSE(has_key("shade alpha", "alp"));
  EXPECT_FALSE(has_key("", "shade"));
  // A spec whose keys are all listed passes Spec::check_known with the set; another key fails.
  EXPECT_TRUE(Spec::parse("red:shade=2,alpha=0.5").value().check_known(key_set(kTable[0].keys)).ok());
  EXPECT_FALSE(Spec::parse("red:hue=2").value().check_known(key_set(kTable[0].keys)).ok());
}

}  // namespace
}  // namespace ballot

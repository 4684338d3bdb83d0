#include "attacks/attack_spec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <string>

namespace ballot::attacks {
namespace {

// Every line of the attack table: a new attack is covered without editing this file.
class EveryAttackName : public ::testing::TestWithParam<AttackEntry> {};

TEST_P(EveryAttackName, ParsesAndRoundTrips) {
  const AttackEntry& c = GetParam();
  const AttackKind kind = c.properties.kind;
  const Domain domain = c.properties.domain;
  for (const std::string_view text : {c.name, c.example}) {
    auto b = Behaviour::parse(text);
    ASSERT_TRUE(b.ok()) << b.error().message;
    EXPECT_EQ(b->kind, kind);
    EXPECT_EQ(b->domain(), domain);
    // Canonical text parses back to the same behaviour, and is stable.
    auto again = Behaviour::parse(b->spec());
    ASSERT_TRUE(again.ok()) << b->spec();
    EXPECT_EQ(*again, *b);
    EXPECT_EQ(again->spec(), b->spec());
  }
  EXPECT_EQ(attack_kind_name(kind), c.name);
  EXPECT_EQ(domain_of(kind), domain);
  EXPECT_FALSE(c.summary.empty());
  if (kind == AttackKind::kNone) {
    EXPECT_TRUE(AttackSpec::parse(c.name)->none());
    return;
  }
  // The example's options reach the behaviour: it differs from the defaults when it has any.
  if (std::string_view(c.example) != c.name) {
    EXPECT_NE(*Behaviour::parse(c.example), *Behaviour::parse(c.name));
  }
  // The same through AttackSpec, with a schedule attached.
  const std::string scheduled = std::string(c.name) + ":from=3,until=9";
  auto spec = AttackSpec::parse(scheduled);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  ASSERT_EQ(spec->behaviours.size(), 1u);
  EXPECT_EQ(spec->behaviours[0].first_round, 3u);
  EXPECT_EQ(spec->behaviours[0].last_round, 9u);
  EXPECT_EQ(*AttackSpec::parse(spec->spec()), *spec);
  EXPECT_NE(spec->find(domain), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Attacks, EveryAttackName, ::testing::ValuesIn(attack_table().begin(), attack_table().end()),
                         [](const auto& info) { return std::string(info.param.name); });

// docs/attacks.md cannot fall behind the table: each attack (but "none") has a row.
TEST(AttackTable, DocsListEveryEntry) {
  std::ifstream file(std::string(BALLOT_SOURCE_DIR) + "/docs/attacks.md");
  ASSERT_TRUE(file.good());
  const std::string docs((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  for (const AttackEntry& entry : attack_table()) {
    if (entry.properties.kind == AttackKind::kNone) continue;
    EXPECT_NE(docs.find("| `" + std::string(entry.name) + "` |"), std::string::npos)
        << entry.name << " has no row in docs/attacks.md";
  }
}

TEST(Behaviour, EveryKindHasADistinctName) {
  std::set<std::string_view> names;
  for (std::size_t k = 0; k < kAttackKindCount; ++k) names.insert(attack_kind_name(static_cast<AttackKind>(k)));
  EXPECT_EQ(names.size(), kAttackKindCount);
}

struct OptionCase {
  const char* text;
  const char* canonical;
};

class BehaviourOptions : public ::testing::TestWithParam<OptionCase> {};

TEST_P(BehaviourOptions, CanonicalFormRoundTrips) {
  auto b = Behaviour::parse(GetParam().text);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->spec(), GetParam().canonical);
  EXPECT_EQ(*Behaviour::parse(b->spec()), *b);
}

INSTANTIATE_TEST_SUITE_P(
    Options, BehaviourOptions,
    ::testing::Values(OptionCase{"scaled:factor=2.5", "scaled:factor=2.5"},
                      OptionCase{"scaled:factor=-10", "scaled"},  // the default is left out
                      OptionCase{"scaled:factor=0.1", "scaled:factor=0.1"},
                      OptionCase{"scaled:factor=1e300", "scaled:factor=1e+300"},
                      OptionCase{"gaussian:sigma=1e-7", "gaussian:sigma=1e-07"},
                      OptionCase{"gaussian:sigma=0.001", "gaussian:sigma=0.001"},
                      OptionCase{"alie:z=1.5", "alie:z=1.5"}, OptionCase{"alie:z=-0.25", "alie:z=-0.25"},
                      OptionCase{"ipm:eps=100", "ipm:eps=100"}, OptionCase{"ipm:eps=0.1", "ipm"},
                      OptionCase{"mimic:target=3", "mimic:target=3"}, OptionCase{"directional", "directional:sign=+1"},
                      OptionCase{"directional:sign=-1", "directional:sign=-1"},
                      OptionCase{"directional:sign=1", "directional:sign=+1"},
                      OptionCase{"omission:p=0.25", "omission:p=0.25"}, OptionCase{"delay:ms=5000", "delay:ms=5000"},
                      OptionCase{" reverse : until=200 , from=100 ", "reverse:from=100,until=200"},
                      OptionCase{"crash:from=5", "crash:from=5"}, OptionCase{"ipm:from=0,eps=1e3", "ipm:eps=1000"},
                      OptionCase{"label_flip:until=18446744073709551614", "label_flip:until=18446744073709551614"}));

TEST(Behaviour, OptionsLandInTheirFields) {
  EXPECT_DOUBLE_EQ(Behaviour::parse("scaled:factor=3")->factor, 3.0);
  EXPECT_DOUBLE_EQ(Behaviour::parse("gaussian:sigma=7")->sigma, 7.0);
  EXPECT_DOUBLE_EQ(Behaviour::parse("alie:z=1.25")->z, 1.25);
  EXPECT_TRUE(std::isnan(Behaviour::parse("alie")->z));
  EXPECT_DOUBLE_EQ(Behaviour::parse("ipm:eps=0.5")->epsilon, 0.5);
  EXPECT_EQ(Behaviour::parse("mimic:target=4")->target, 4u);
  EXPECT_FALSE(Behaviour::parse("directional:sign=-1")->direction);
  EXPECT_DOUBLE_EQ(Behaviour::parse("omission:p=0.3")->probability, 0.3);
  EXPECT_EQ(Behaviour::parse("delay:ms=250")->delay_ms, 250u);
  // Defaults of the literature.
  const Behaviour defaults;
  EXPECT_EQ(defaults.kind, AttackKind::kNone);
  EXPECT_DOUBLE_EQ(defaults.sigma, 200.0);
  EXPECT_DOUBLE_EQ(defaults.epsilon, 0.1);
  EXPECT_DOUBLE_EQ(defaults.probability, 1.0);
}

TEST(Behaviour, ErrorsNameTheProblem) {
  struct Bad {
    const char* text;
    const char* mentions;
  };
  for (const Bad& bad :
       {Bad{"flip", "flip"}, Bad{"ipm:epsilon=1", "epsilon"}, Bad{"ipm:eps=-1", "eps"}, Bad{"ipm:eps=0", "eps"},
        Bad{"ipm:eps=abc", "abc"}, Bad{"gaussian:sigma=-1", "sigma"}, Bad{"gaussian:sigma=inf", "sigma"},
        Bad{"omission:p=1.5", "p must"}, Bad{"delay:ms=-5", "-5"}, Bad{"delay:ms=4294967296", "ms"},
        Bad{"mimic:target=x", "x"}, Bad{"reverse:from=10,until=5", "until"}, Bad{"reverse:from=-1", "from"},
        Bad{"directional:sign=0", "sign"}, Bad{"zero:factor=2", "factor"}, Bad{"none:x=1", "none"}, Bad{"alie:z", "="},
        Bad{"", "empty"}}) {
    auto b = Behaviour::parse(bad.text);
    ASSERT_FALSE(b.ok()) << bad.text;
    EXPECT_EQ(b.error().code, ErrorCode::kInvalidArgument) << bad.text;
    EXPECT_NE(b.error().message.find(bad.mentions), std::string::npos) << bad.text << ": " << b.error().message;
  }
}

TEST(AttackSpec, NoneAndEmpty) {
  for (const char* text : {"none", "", "  ", " none "}) {
    auto spec = AttackSpec::parse(text);
    ASSERT_TRUE(spec.ok()) << text;
    EXPECT_TRUE(spec->none());
    EXPECT_EQ(spec->spec(), "none");
    EXPECT_EQ(spec->find(Domain::kGradient), nullptr);
  }
}

TEST(AttackSpec, JoinsBehavioursOfDifferentDomains) {
  auto spec = AttackSpec::parse("delay:ms=5000 + label_flip");
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  ASSERT_EQ(spec->behaviours.size(), 2u);
  EXPECT_EQ(spec->spec(), "label_flip + delay:ms=5000");  // domain order
  EXPECT_EQ(spec->find(Domain::kData)->kind, AttackKind::kLabelFlip);
  EXPECT_EQ(spec->find(Domain::kProtocol)->delay_ms, 5000u);
  EXPECT_EQ(spec->find(Domain::kGradient), nullptr);
  EXPECT_EQ(*AttackSpec::parse(spec->spec()), *spec);

  // '+' right after '=' is a sign, elsewhere a separator (with or without spaces).
  auto signed_value = AttackSpec::parse("directional:sign=+1+crash");
  ASSERT_TRUE(signed_value.ok()) << signed_value.error().message;
  ASSERT_EQ(signed_value->behaviours.size(), 2u);
  EXPECT_TRUE(signed_value->find(Domain::kSign)->direction);
  EXPECT_EQ(signed_value->spec(), "directional:sign=+1 + crash");

  auto exponent = AttackSpec::parse("ipm:eps=1e+3+crash + scaled:factor=2.5E+1");
  ASSERT_FALSE(exponent.ok());  // two gradient attacks: the '+' of each exponent stayed in its value
  EXPECT_NE(exponent.error().message.find("'ipm' and 'scaled'"), std::string::npos) << exponent.error().message;
  auto with_exponent = AttackSpec::parse("ipm:eps=1e+3+crash");
  ASSERT_TRUE(with_exponent.ok()) << with_exponent.error().message;
  EXPECT_DOUBLE_EQ(with_exponent->find(Domain::kGradient)->epsilon, 1000.0);
  EXPECT_EQ(with_exponent->spec(), "ipm:eps=1000 + crash");
  // Canonical numbers with an exponent survive the '+' split.
  auto huge = AttackSpec::parse("scaled:factor=1e300 + crash");
  ASSERT_TRUE(huge.ok());
  EXPECT_EQ(huge->spec(), "scaled:factor=1e+300 + crash");
  EXPECT_EQ(*AttackSpec::parse(huge->spec()), *huge);

  auto four = AttackSpec::parse("alie:until=99 + reverse:from=100 + label_flip + omission:p=0.5");
  ASSERT_TRUE(four.ok());
  EXPECT_EQ(four->behaviours.size(), 4u);
  EXPECT_EQ(*AttackSpec::parse(four->spec()), *four);
}

TEST(AttackSpec, Errors) {
  struct Bad {
    const char* text;
    const char* mentions;
  };
  for (const Bad& bad : {Bad{"alie + ipm", "gradient"}, Bad{"reverse + random", "sign"}, Bad{"none + alie", "none"},
                         Bad{"alie +", "empty"}, Bad{"+", "empty"}, Bad{"alie ++ crash", "empty"},
                         Bad{"alie + bogus", "bogus"}, Bad{"crash + delay:ms=x", "ms"},
                         // a gradient and a sign attack in the same round: both replace the message
                         Bad{"alie + reverse", "disjoint"}, Bad{"ipm:until=10 + random:from=10", "disjoint"}}) {
    auto spec = AttackSpec::parse(bad.text);
    ASSERT_FALSE(spec.ok()) << bad.text;
    EXPECT_EQ(spec.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(spec.error().message.find(bad.mentions), std::string::npos) << bad.text << ": " << spec.error().message;
  }
}

TEST(Schedule, ActiveWithinInclusiveBounds) {
  const Behaviour always = *Behaviour::parse("reverse");
  EXPECT_TRUE(always.active(0));
  EXPECT_TRUE(always.active(std::numeric_limits<std::uint64_t>::max()));
  const Behaviour window = *Behaviour::parse("reverse:from=100,until=200");
  EXPECT_FALSE(window.active(99));
  EXPECT_TRUE(window.active(100));
  EXPECT_TRUE(window.active(150));
  EXPECT_TRUE(window.active(200));
  EXPECT_FALSE(window.active(201));
  const Behaviour single = *Behaviour::parse("crash:from=7,until=7");
  EXPECT_TRUE(single.active(7));
  EXPECT_FALSE(single.active(6));
  EXPECT_FALSE(single.active(8));
  EXPECT_FALSE(Behaviour{}.active(0));  // kNone is never active

  const AttackSpec spec = *AttackSpec::parse("alie:from=10 + crash:until=4");
  EXPECT_EQ(spec.active(Domain::kGradient, 9), nullptr);
  EXPECT_NE(spec.active(Domain::kGradient, 10), nullptr);
  EXPECT_NE(spec.active(Domain::kProtocol, 4), nullptr);
  EXPECT_EQ(spec.active(Domain::kProtocol, 5), nullptr);
  EXPECT_EQ(spec.active(Domain::kSign, 5), nullptr);
}

TEST(Behaviour, EqualityTreatsNanZAsEqual) {
  EXPECT_EQ(Behaviour{}, Behaviour{});
  Behaviour a = *Behaviour::parse("alie"), b = *Behaviour::parse("alie");
  EXPECT_EQ(a, b);
  b.z = 1;
  EXPECT_FALSE(a == b);
  EXPECT_EQ(domain_name(Domain::kGradient), "gradient");
  EXPECT_EQ(domain_name(Domain::kProtocol), "protocol");
}

}  // namespace
}  // namespace ballot::attacks

// What the Byzantine nodes do: one or more attack behaviours, each with its options and the rounds
// in which it is active (ALGORITHMS.md §6; docs/attacks.md lists every attack with its formula).
//
// Text syntax (ballot::Spec, core/spec.h; '+' joins behaviours of different domains):
//   "none" | "alie" | "ipm:eps=0.5" | "label_flip + delay:ms=5000" | "reverse:from=100,until=200"
// Names, by domain:
//   gradient  sign_flip, scaled[:factor=λ], gaussian[:sigma=σ], zero, alie[:z=Z], ipm[:eps=ε],
//             mimic[:target=K]
//   sign      reverse, random, directional[:sign=+1|-1], omniscient
//   data      label_flip
//   protocol  crash, omission[:p=P], delay[:ms=MS], equivocation, replay, forged_signature,
//             malformed, oversized, wrong_digest
// Every behaviour accepts from=R and until=R (inclusive rounds). A '+' that directly follows '='
// or the 'e' of an exponent belongs to the value ("directional:sign=+1", "ipm:eps=1e+3"); every
// other '+' separates behaviours.
// At most one behaviour per domain; "none" stands alone. Errors (kInvalidArgument) name the bad
// word, key or value.
//
// Values; parsing is O(length of the text). Thread-safety: plain values, no shared state.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/registry.h"
#include "core/result.h"

namespace ballot::attacks {

enum class Domain : std::uint8_t { kNone, kGradient, kSign, kData, kProtocol };

enum class AttackKind : std::uint8_t {
  kNone,
  // gradient domain
  kSignFlip,
  kScaled,
  kGaussian,
  kZero,
  kAlie,
  kIpm,
  kMimic,
  // sign domain
  kReverse,
  kRandomSign,
  kDirectional,
  kOmniscient,
  // data domain
  kLabelFlip,
  // protocol domain
  kCrash,
  kOmission,
  kDelay,
  kEquivocation,
  kReplay,
  kForgedSignature,
  kMalformedFrame,
  kOversizedFrame,
  kWrongDigest,
};
inline constexpr std::size_t kAttackKindCount = 22;

// "gradient", "sign", ... ("none" for kNone).
std::string_view domain_name(Domain domain) noexcept;
// The spec name of a kind: "sign_flip", "random", "malformed", ...
std::string_view attack_kind_name(AttackKind kind) noexcept;
Domain domain_of(AttackKind kind) noexcept;

// One attack with its options. Options that do not belong to `kind` keep their defaults.
struct Behaviour {
  AttackKind kind = AttackKind::kNone;

  double factor = -10;  // scaled: λ; the vector sent is λ·g_own (−10: a large reversed step)
  double sigma = 200;   // gaussian: σ of N(0, σ²I) (the common choice in the literature)
  double z = std::numeric_limits<double>::quiet_NaN();  // alie: NaN = z(n, m) of ALGORITHMS.md §6
  double epsilon = 0.1;                                 // ipm: ε (0.1 against median/Krum; > 1 to break the mean)
  std::size_t target = 0;    // mimic: which honest worker (index among the honest ones, mod their count)
  bool direction = true;     // directional: true = all +1
  double probability = 1.0;  // omission: drop probability per round, in [0, 1]
  std::uint32_t delay_ms =
      0;  // delay: how long past the round start to send (0 = the runtime's choice, 2× the deadline)
  std::uint64_t first_round = 0;                                         // schedule: active for
  std::uint64_t last_round = std::numeric_limits<std::uint64_t>::max();  // first_round ≤ r ≤ last_round

  Domain domain() const noexcept { return domain_of(kind); }
  // kind != kNone and first_round ≤ round ≤ last_round.
  bool active(std::uint64_t round) const noexcept;
  // One behaviour ("ipm:eps=0.5,from=3"); no '+'.
  static Result<Behaviour> parse(std::string_view text);
  // Canonical: the name, then the options that differ from their defaults in sorted key order
  // (directional always carries sign=); doubles in shortest round-trip form. parse(spec()) == *this.
  std::string spec() const;

  // Equal kinds and options (two NaN z compare equal).
  friend bool operator==(const Behaviour& a, const Behaviour& b) noexcept;
};

// The attacks are the lines of attack_table() (core/registry.h: name, keys, example, summary,
// option parser, {kind, domain}), in AttackKind order; docs/attacks.md documents each, and a test
// checks that it lists every name. The parser gets a Spec whose keys are already checked against
// the entry's (and from, until), and fills the behaviour's options.
struct AttackProperties {
  AttackKind kind = AttackKind::kNone;
  Domain domain = Domain::kNone;
};
using AttackOptionParser = Status (*)(const Spec& spec, std::string_view text, Behaviour& out);
using AttackEntry = TableEntry<AttackOptionParser, AttackProperties>;
std::span<const AttackEntry> attack_table() noexcept;

struct AttackSpec {
  std::vector<Behaviour> behaviours;  // at most one per domain, none of kind kNone

  // "none" (or empty/blank text) gives no behaviour. Errors name the bad word or option.
  static Result<AttackSpec> parse(std::string_view text);
  // Behaviours joined by " + " in domain order; "none" when there is none.
  std::string spec() const;
  bool none() const noexcept { return behaviours.empty(); }
  // The behaviour of that domain, or null.
  const Behaviour* find(Domain domain) const noexcept;
  // find(domain) if it is active in `round`, else null.
  const Behaviour* active(Domain domain, std::uint64_t round) const noexcept;

  friend bool operator==(const AttackSpec& a, const AttackSpec& b) noexcept { return a.behaviours == b.behaviours; }
};

}  // namespace ballot::attacks

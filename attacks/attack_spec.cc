#include "attacks/attack_spec.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <set>
#include <utility>

#include "core/spec.h"

namespace ballot::attacks {
namespace {

struct KindInfo {
  AttackKind kind;
  std::string_view name;
  Domain domain;
};

// Indexed by the numeric value of AttackKind.
constexpr std::array<KindInfo, kAttackKindCount> kKinds = {{
    {AttackKind::kNone, "none", Domain::kNone},
    {AttackKind::kSignFlip, "sign_flip", Domain::kGradient},
    {AttackKind::kScaled, "scaled", Domain::kGradient},
    {AttackKind::kGaussian, "gaussian", Domain::kGradient},
    {AttackKind::kZero, "zero", Domain::kGradient},
    {AttackKind::kAlie, "alie", Domain::kGradient},
    {AttackKind::kIpm, "ipm", Domain::kGradient},
    {AttackKind::kMimic, "mimic", Domain::kGradient},
    {AttackKind::kReverse, "reverse", Domain::kSign},
    {AttackKind::kRandomSign, "random", Domain::kSign},
    {AttackKind::kDirectional, "directional", Domain::kSign},
    {AttackKind::kOmniscient, "omniscient", Domain::kSign},
    {AttackKind::kLabelFlip, "label_flip", Domain::kData},
    {AttackKind::kCrash, "crash", Domain::kProtocol},
    {AttackKind::kOmission, "omission", Domain::kProtocol},
    {AttackKind::kDelay, "delay", Domain::kProtocol},
    {AttackKind::kEquivocation, "equivocation", Domain::kProtocol},
    {AttackKind::kReplay, "replay", Domain::kProtocol},
    {AttackKind::kForgedSignature, "forged_signature", Domain::kProtocol},
    {AttackKind::kMalformedFrame, "malformed", Domain::kProtocol},
    {AttackKind::kOversizedFrame, "oversized", Domain::kProtocol},
    {AttackKind::kWrongDigest, "wrong_digest", Domain::kProtocol},
}};

std::string known_names() {
  std::string out;
  for (const auto& info : kKinds) {
    if (!out.empty()) out += ", ";
    out += info.name;
  }
  return out;
}

Error bad(std::string_view text, const std::string& why) {
  return make_error(ErrorCode::kInvalidArgument, "bad attack '" + std::string(text) + "': " + why);
}

std::string format_double(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);  // shortest round trip
  return std::string(buffer, result.ptr);
}

// A non-negative decimal integer up to `max`; from_chars rejects signs, spaces and overflow.
Result<std::uint64_t> get_unsigned(const Spec& spec, std::string_view text, const std::string& key,
                                   std::uint64_t fallback, std::uint64_t max) {
  if (!spec.has(key)) return fallback;
  const std::string& value = spec.options().at(key);
  std::uint64_t parsed = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || parsed > max)
    return bad(text, "option '" + key + "' needs an integer in [0, " + std::to_string(max) + "], got '" + value + "'");
  return parsed;
}

Result<double> get_finite(const Spec& spec, std::string_view text, const std::string& key, double fallback) {
  auto value = spec.get_double(key, fallback);
  if (!value.ok()) return bad(text, value.error().message);
  return *value;
}

}  // namespace

std::string_view domain_name(Domain domain) noexcept {
  switch (domain) {
    case Domain::kNone: return "none";
    case Domain::kGradient: return "gradient";
    case Domain::kSign: return "sign";
    case Domain::kData: return "data";
    case Domain::kProtocol: return "protocol";
  }
  return "none";
}

std::string_view attack_kind_name(AttackKind kind) noexcept {
  const auto index = static_cast<std::size_t>(kind);
  return index < kKinds.size() ? kKinds[index].name : std::string_view("none");
}

Domain domain_of(AttackKind kind) noexcept {
  const auto index = static_cast<std::size_t>(kind);
  return index < kKinds.size() ? kKinds[index].domain : Domain::kNone;
}

bool Behaviour::active(std::uint64_t round) const noexcept {
  return kind != AttackKind::kNone && first_round <= round && round <= last_round;
}

bool operator==(const Behaviour& a, const Behaviour& b) noexcept {
  const bool same_z = (std::isnan(a.z) && std::isnan(b.z)) || a.z == b.z;
  return a.kind == b.kind && a.factor == b.factor && a.sigma == b.sigma && same_z && a.epsilon == b.epsilon &&
         a.target == b.target && a.direction == b.direction && a.probability == b.probability &&
         a.delay_ms == b.delay_ms && a.first_round == b.first_round && a.last_round == b.last_round;
}

Result<Behaviour> Behaviour::parse(std::string_view text) {
  BALLOT_ASSIGN_OR_RETURN(Spec spec, Spec::parse(text));
  Behaviour b;
  const KindInfo* info = nullptr;
  for (const auto& candidate : kKinds)
    if (candidate.name == spec.name()) info = &candidate;
  if (info == nullptr) return bad(text, "unknown attack '" + spec.name() + "' (known: " + known_names() + ")");
  b.kind = info->kind;

  std::set<std::string> known = {"from", "until"};
  switch (b.kind) {
    case AttackKind::kNone:
      if (!spec.options().empty()) return bad(text, "'none' takes no options");
      return b;
    case AttackKind::kScaled: {
      known.insert("factor");
      BALLOT_ASSIGN_OR_RETURN(b.factor, get_finite(spec, text, "factor", b.factor));
      break;
    }
    case AttackKind::kGaussian: {
      known.insert("sigma");
      BALLOT_ASSIGN_OR_RETURN(b.sigma, get_finite(spec, text, "sigma", b.sigma));
      if (b.sigma < 0) return bad(text, "sigma must be >= 0");
      break;
    }
    case AttackKind::kAlie: {
      known.insert("z");
      if (spec.has("z")) {
        BALLOT_ASSIGN_OR_RETURN(b.z, get_finite(spec, text, "z", 0));
      }
      break;
    }
    case AttackKind::kIpm: {
      known.insert("eps");
      BALLOT_ASSIGN_OR_RETURN(b.epsilon, get_finite(spec, text, "eps", b.epsilon));
      if (!(b.epsilon > 0)) return bad(text, "eps must be > 0");
      break;
    }
    case AttackKind::kMimic: {
      known.insert("target");
      BALLOT_ASSIGN_OR_RETURN(const std::uint64_t target,
                              get_unsigned(spec, text, "target", 0, std::numeric_limits<std::uint32_t>::max()));
      b.target = static_cast<std::size_t>(target);
      break;
    }
    case AttackKind::kDirectional: {
      known.insert("sign");
      const std::string sign = spec.get_string("sign", "+1");
      if (sign != "+1" && sign != "-1" && sign != "1") return bad(text, "sign must be +1 or -1, got '" + sign + "'");
      b.direction = sign != "-1";
      break;
    }
    case AttackKind::kOmission: {
      known.insert("p");
      BALLOT_ASSIGN_OR_RETURN(b.probability, get_finite(spec, text, "p", b.probability));
      if (b.probability < 0 || b.probability > 1) return bad(text, "p must be in [0, 1]");
      break;
    }
    case AttackKind::kDelay: {
      known.insert("ms");
      BALLOT_ASSIGN_OR_RETURN(const std::uint64_t ms,
                              get_unsigned(spec, text, "ms", 0, std::numeric_limits<std::uint32_t>::max()));
      b.delay_ms = static_cast<std::uint32_t>(ms);
      break;
    }
    default:
      break;
  }
  if (auto status = spec.check_known(known); !status.ok()) return bad(text, status.error().message);
  BALLOT_ASSIGN_OR_RETURN(b.first_round, get_unsigned(spec, text, "from", 0, std::numeric_limits<std::uint64_t>::max()));
  BALLOT_ASSIGN_OR_RETURN(b.last_round, get_unsigned(spec, text, "until", std::numeric_limits<std::uint64_t>::max(),
                                                     std::numeric_limits<std::uint64_t>::max()));
  if (b.first_round > b.last_round) return bad(text, "from must not exceed until");
  return b;
}

std::string Behaviour::spec() const {
  const Behaviour defaults;
  std::vector<std::pair<std::string, std::string>> options;  // sorted by key below
  switch (kind) {
    case AttackKind::kScaled:
      if (factor != defaults.factor) options.emplace_back("factor", format_double(factor));
      break;
    case AttackKind::kGaussian:
      if (sigma != defaults.sigma) options.emplace_back("sigma", format_double(sigma));
      break;
    case AttackKind::kAlie:
      if (!std::isnan(z)) options.emplace_back("z", format_double(z));
      break;
    case AttackKind::kIpm:
      if (epsilon != defaults.epsilon) options.emplace_back("eps", format_double(epsilon));
      break;
    case AttackKind::kMimic:
      if (target != defaults.target) options.emplace_back("target", std::to_string(target));
      break;
    case AttackKind::kDirectional:
      options.emplace_back("sign", direction ? "+1" : "-1");
      break;
    case AttackKind::kOmission:
      if (probability != defaults.probability) options.emplace_back("p", format_double(probability));
      break;
    case AttackKind::kDelay:
      if (delay_ms != defaults.delay_ms) options.emplace_back("ms", std::to_string(delay_ms));
      break;
    default:
      break;
  }
  if (kind != AttackKind::kNone) {
    if (first_round != defaults.first_round) options.emplace_back("from", std::to_string(first_round));
    if (last_round != defaults.last_round) options.emplace_back("until", std::to_string(last_round));
  }
  std::sort(options.begin(), options.end());
  std::string out(attack_kind_name(kind));
  for (std::size_t i = 0; i < options.size(); ++i) {
    out += i == 0 ? ':' : ',';
    out += options[i].first + "=" + options[i].second;
  }
  return out;
}

Result<AttackSpec> AttackSpec::parse(std::string_view text) {
  // Split on '+' except inside a number: right after '=' ("sign=+1") or in an exponent after a
  // digit ("eps=1e+3").
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  char previous = '\0', before = '\0';  // the last two non-space characters
  for (std::size_t i = 0; i <= text.size(); ++i) {
    const bool in_number = previous == '=' || ((previous == 'e' || previous == 'E') &&
                                               ((before >= '0' && before <= '9') || before == '.'));
    if (i == text.size() || (text[i] == '+' && !in_number)) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
      previous = before = '\0';
      continue;
    }
    if (text[i] != ' ' && text[i] != '\t' && text[i] != '\n') {
      before = previous;
      previous = text[i];
    }
  }
  AttackSpec out;
  if (parts.size() == 1 && parts[0].find_first_not_of(" \t\n") == std::string_view::npos) return out;
  std::array<bool, 5> seen{};
  for (const std::string_view part : parts) {
    if (part.find_first_not_of(" \t\n") == std::string_view::npos)
      return bad(text, "empty behaviour around '+'");
    BALLOT_ASSIGN_OR_RETURN(Behaviour b, Behaviour::parse(part));
    if (b.kind == AttackKind::kNone) {
      if (parts.size() > 1) return bad(text, "'none' cannot be combined with other attacks");
      return out;
    }
    const auto domain = static_cast<std::size_t>(b.domain());
    if (seen[domain])
      return bad(text, "two " + std::string(domain_name(b.domain())) + "-domain attacks ('" +
                           std::string(attack_kind_name(out.find(b.domain())->kind)) + "' and '" +
                           std::string(attack_kind_name(b.kind)) + "'); at most one per domain");
    seen[domain] = true;
    out.behaviours.push_back(b);
  }
  std::stable_sort(out.behaviours.begin(), out.behaviours.end(),
                   [](const Behaviour& a, const Behaviour& b) { return a.domain() < b.domain(); });
  // A gradient-domain and a sign-domain behaviour both replace the node's one message (on the
  // vote path a gradient attack is crafted in sign space): in a round where both are active one
  // would silently win. They may take turns, in disjoint rounds.
  const Behaviour* gradient = out.find(Domain::kGradient);
  const Behaviour* sign = out.find(Domain::kSign);
  if (gradient != nullptr && sign != nullptr && gradient->first_round <= sign->last_round &&
      sign->first_round <= gradient->last_round) {
    return bad(text, "'" + std::string(attack_kind_name(gradient->kind)) + "' and '" +
                         std::string(attack_kind_name(sign->kind)) +
                         "' both replace the node's message; give them disjoint rounds with from=/until=");
  }
  return out;
}

std::string AttackSpec::spec() const {
  if (behaviours.empty()) return "none";
  std::vector<const Behaviour*> ordered;
  for (const auto& b : behaviours) ordered.push_back(&b);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const Behaviour* a, const Behaviour* b) { return a->domain() < b->domain(); });
  std::string out;
  for (const Behaviour* b : ordered) {
    if (!out.empty()) out += " + ";
    out += b->spec();
  }
  return out;
}

const Behaviour* AttackSpec::find(Domain domain) const noexcept {
  for (const auto& b : behaviours)
    if (b.domain() == domain) return &b;
  return nullptr;
}

const Behaviour* AttackSpec::active(Domain domain, std::uint64_t round) const noexcept {
  const Behaviour* b = find(domain);
  return b != nullptr && b->active(round) ? b : nullptr;
}

}  // namespace ballot::attacks

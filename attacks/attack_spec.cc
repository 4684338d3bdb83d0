#include "attacks/attack_spec.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <iterator>
#include <set>
#include <utility>

#include "core/registry.h"
#include "core/spec.h"

namespace ballot::attacks {
namespace {

Error bad(std::string_view text, const std::string& why) {
  return make_error(ErrorCode::kInvalidArgument, "bad attack '" + std::string(text) + "': " + why);
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

Status no_options(const Spec&, std::string_view, Behaviour&) { return {}; }

Status scaled_options(const Spec& spec, std::string_view text, Behaviour& b) {
  BALLOT_ASSIGN_OR_RETURN(b.factor, get_finite(spec, text, "factor", b.factor));
  return {};
}

Status gaussian_options(const Spec& spec, std::string_view text, Behaviour& b) {
  BALLOT_ASSIGN_OR_RETURN(b.sigma, get_finite(spec, text, "sigma", b.sigma));
  if (b.sigma < 0) return bad(text, "sigma must be >= 0");
  return {};
}

Status alie_options(const Spec& spec, std::string_view text, Behaviour& b) {
  if (spec.has("z")) {
    BALLOT_ASSIGN_OR_RETURN(b.z, get_finite(spec, text, "z", 0));
  }
  return {};
}

Status ipm_options(const Spec& spec, std::string_view text, Behaviour& b) {
  BALLOT_ASSIGN_OR_RETURN(b.epsilon, get_finite(spec, text, "eps", b.epsilon));
  if (!(b.epsilon > 0)) return bad(text, "eps must be > 0");
  return {};
}

Status mimic_options(const Spec& spec, std::string_view text, Behaviour& b) {
  BALLOT_ASSIGN_OR_RETURN(const std::uint64_t target,
                          get_unsigned(spec, text, "target", 0, std::numeric_limits<std::uint32_t>::max()));
  b.target = static_cast<std::size_t>(target);
  return {};
}

Status directional_options(const Spec& spec, std::string_view text, Behaviour& b) {
  const std::string sign = spec.get_string("sign", "+1");
  if (sign != "+1" && sign != "-1" && sign != "1") return bad(text, "sign must be +1 or -1, got '" + sign + "'");
  b.direction = sign != "-1";
  return {};
}

Status omission_options(const Spec& spec, std::string_view text, Behaviour& b) {
  BALLOT_ASSIGN_OR_RETURN(b.probability, get_finite(spec, text, "p", b.probability));
  if (b.probability < 0 || b.probability > 1) return bad(text, "p must be in [0, 1]");
  return {};
}

Status delay_options(const Spec& spec, std::string_view text, Behaviour& b) {
  BALLOT_ASSIGN_OR_RETURN(const std::uint64_t ms,
                          get_unsigned(spec, text, "ms", 0, std::numeric_limits<std::uint32_t>::max()));
  b.delay_ms = static_cast<std::uint32_t>(ms);
  return {};
}

constexpr AttackProperties gradient(AttackKind kind) { return {kind, Domain::kGradient}; }
constexpr AttackProperties sign(AttackKind kind) { return {kind, Domain::kSign}; }
constexpr AttackProperties protocol(AttackKind kind) { return {kind, Domain::kProtocol}; }

// One line per attack, in AttackKind order: name, keys (besides from and until), example,
// summary, option parser, {kind, domain}. docs/attacks.md has the formulas and papers; the
// behaviour itself lives in the domain's file (gradient_attacks.cc, sign_attacks.cc, ...).
constexpr AttackEntry kKinds[] = {
    {"none", "", "none", "honest behaviour", &no_options, {AttackKind::kNone, Domain::kNone}},
    {"sign_flip", "", "sign_flip", "-g_own (Bernstein et al. 2019)", &no_options, gradient(AttackKind::kSignFlip)},
    {"scaled", "factor", "scaled:factor=-4", "factor * g_own (Bernstein et al. 2019)", &scaled_options,
     gradient(AttackKind::kScaled)},
    {"gaussian", "sigma", "gaussian:sigma=50", "N(0, sigma^2) per coordinate (Blanchard et al. 2017)",
     &gaussian_options, gradient(AttackKind::kGaussian)},
    {"zero", "", "zero", "the zero vector", &no_options, gradient(AttackKind::kZero)},
    {"alie", "z", "alie:z=1.5", "mean - z * std, A Little Is Enough (Baruch et al., NeurIPS 2019)", &alie_options,
     gradient(AttackKind::kAlie)},
    {"ipm", "eps", "ipm:eps=0.5", "-eps * mean, inner-product manipulation (Xie et al., UAI 2019)", &ipm_options,
     gradient(AttackKind::kIpm)},
    {"mimic", "target", "mimic:target=2", "an honest worker's vector (Karimireddy et al., ICLR 2022)", &mimic_options,
     gradient(AttackKind::kMimic)},
    {"reverse", "", "reverse", "the reversed signs (Sohn et al., NeurIPS 2020)", &no_options,
     sign(AttackKind::kReverse)},
    {"random", "", "random", "uniform random signs (Sohn et al., NeurIPS 2020)", &no_options,
     sign(AttackKind::kRandomSign)},
    {"directional", "sign", "directional:sign=-1", "all +1 or all -1 (Sohn et al., NeurIPS 2020)", &directional_options,
     sign(AttackKind::kDirectional)},
    {"omniscient", "", "omniscient", "code-aware worst-case signs (ALGORITHMS.md 3, 6)", &no_options,
     sign(AttackKind::kOmniscient)},
    {"label_flip",
     "",
     "label_flip",
     "trains on flipped labels (Biggio et al., ACML 2011)",
     &no_options,
     {AttackKind::kLabelFlip, Domain::kData}},
    {"crash", "", "crash", "stops sending", &no_options, protocol(AttackKind::kCrash)},
    {"omission", "p", "omission:p=0.5", "skips a send with probability p", &omission_options,
     protocol(AttackKind::kOmission)},
    {"delay", "ms", "delay:ms=50", "sends its vote ms milliseconds late", &delay_options, protocol(AttackKind::kDelay)},
    {"equivocation", "", "equivocation", "different votes to different receivers", &no_options,
     protocol(AttackKind::kEquivocation)},
    {"replay", "", "replay", "resends a frame of an earlier round", &no_options, protocol(AttackKind::kReplay)},
    {"forged_signature", "", "forged_signature", "a frame with one signature bit flipped", &no_options,
     protocol(AttackKind::kForgedSignature)},
    {"malformed", "", "malformed", "a frame with a bad header", &no_options, protocol(AttackKind::kMalformedFrame)},
    {"oversized", "", "oversized", "a header announcing more than the limit", &no_options,
     protocol(AttackKind::kOversizedFrame)},
    {"wrong_digest", "", "wrong_digest", "a vote whose digest does not match", &no_options,
     protocol(AttackKind::kWrongDigest)},
};
static_assert(std::size(kKinds) == kAttackKindCount);
static_assert(
    [] {
      for (std::size_t k = 0; k < std::size(kKinds); ++k)
        if (static_cast<std::size_t>(kKinds[k].properties.kind) != k) return false;
      return true;
    }(),
    "kKinds must be in AttackKind order");

}  // namespace

std::string_view domain_name(Domain domain) noexcept {
  switch (domain) {
    case Domain::kNone:
      return "none";
    case Domain::kGradient:
      return "gradient";
    case Domain::kSign:
      return "sign";
    case Domain::kData:
      return "data";
    case Domain::kProtocol:
      return "protocol";
  }
  return "none";
}

std::span<const AttackEntry> attack_table() noexcept { return kKinds; }

std::string_view attack_kind_name(AttackKind kind) noexcept {
  const auto index = static_cast<std::size_t>(kind);
  return index < std::size(kKinds) ? kKinds[index].name : std::string_view("none");
}

Domain domain_of(AttackKind kind) noexcept {
  const auto index = static_cast<std::size_t>(kind);
  return index < std::size(kKinds) ? kKinds[index].properties.domain : Domain::kNone;
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
  const AttackEntry* entry = find_entry(attack_table(), spec.name());
  if (entry == nullptr)
    return bad(text, "unknown attack '" + spec.name() + "' (known: " + joined_names(attack_table()) + ")");
  b.kind = entry->properties.kind;
  if (b.kind == AttackKind::kNone) {
    if (!spec.options().empty()) return bad(text, "'none' takes no options");
    return b;
  }
  if (auto status = spec.check_known(key_set(entry->keys, {"from", "until"})); !status.ok())
    return bad(text, status.error().message);
  BALLOT_TRY(entry->make(spec, text, b));
  BALLOT_ASSIGN_OR_RETURN(b.first_round,
                          get_unsigned(spec, text, "from", 0, std::numeric_limits<std::uint64_t>::max()));
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
      if (factor != defaults.factor) options.emplace_back("factor", format_number(factor));
      break;
    case AttackKind::kGaussian:
      if (sigma != defaults.sigma) options.emplace_back("sigma", format_number(sigma));
      break;
    case AttackKind::kAlie:
      if (!std::isnan(z)) options.emplace_back("z", format_number(z));
      break;
    case AttackKind::kIpm:
      if (epsilon != defaults.epsilon) options.emplace_back("eps", format_number(epsilon));
      break;
    case AttackKind::kMimic:
      if (target != defaults.target) options.emplace_back("target", std::to_string(target));
      break;
    case AttackKind::kDirectional:
      options.emplace_back("sign", direction ? "+1" : "-1");
      break;
    case AttackKind::kOmission:
      if (probability != defaults.probability) options.emplace_back("p", format_number(probability));
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
    if (part.find_first_not_of(" \t\n") == std::string_view::npos) return bad(text, "empty behaviour around '+'");
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

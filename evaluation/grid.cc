#include "evaluation/grid.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "attacks/attack_spec.h"
#include "attacks/targets.h"
#include "coding/allocation_matrix.h"
#include "coding/codec_registry.h"
#include "core/file_io.h"
#include "core/json_nesting.h"
#include "core/spec.h"
#include "learning/optimizer.h"
#include "robust/registry.h"
#include "runtime/cluster_config.h"

namespace ballot::evaluation {
namespace {

using Json = nlohmann::json;

Error grid_error(const std::string& why) { return make_error(ErrorCode::kInvalidArgument, "grid: " + why); }

std::string trim(std::string_view text) {
  std::size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return std::string(text.substr(begin, end - begin));
}

// The attack registry of the runtime: whatever `ballot train --attack` accepts.
Status check_attack(const std::string& attack) {
  auto parsed = attacks::AttackSpec::parse(attack);
  if (!parsed.ok()) return parsed.error();
  return {};
}

// "deterministic" alone means deterministic:b=<b> (runtime/training.h).
Result<Spec> code_spec_for(const std::string& code, std::size_t byzantine) {
  BALLOT_ASSIGN_OR_RETURN(Spec spec, Spec::parse(code));
  if (spec.name() == "deterministic" && !spec.has("b"))
    return Spec::parse("deterministic:b=" + std::to_string(byzantine));
  return spec;
}

runtime::TrainingOptions cell_options(const Grid& grid, const Defence& defence, Setting setting,
                                      const std::string& attack, std::uint64_t seed) {
  runtime::TrainingOptions options = grid.base;
  options.nodes = setting.nodes;
  options.byzantine = setting.byzantine;
  options.code = defence.code;
  options.rule = defence.rule;
  options.codec = defence.codec;
  if (defence.update) options.update = *defence.update;
  if (defence.worker_momentum) options.worker_momentum = *defence.worker_momentum;
  // validate() checked that the update rule has a default schedule.
  if (auto lr = defence_lr(grid, defence); lr.ok()) options.lr = *lr;
  options.seed = seed;
  options.attack = attack;
  options.attackers = attack == "none" ? 0 : setting.byzantine;
  options.attacker_choice = grid.attacker_choice;
  return options;
}

// Why the runtime cannot run these options, or nothing.
std::optional<std::string> inapplicable(const runtime::TrainingOptions& options) {
  if (auto status = options.validate(); !status.ok()) return status.error().message;
  if (options.rule == "vote") {
    auto spec = code_spec_for(options.code, options.byzantine);
    if (!spec.ok()) return spec.error().message;
    auto code = coding::make_allocation_matrix(*spec, options.nodes, options.seed);
    if (!code.ok()) return code.error().message;
  }
  return std::nullopt;
}

// Reads an array of T from root[key] when present; `what` names the entry in errors.
template <typename T>
Status read_array(const Json& root, const char* key, std::vector<T>& out) {
  const auto it = root.find(key);
  if (it == root.end()) return {};
  if (!it->is_array()) return grid_error("'" + std::string(key) + "' must be an array");
  std::vector<T> values;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const Json& entry = (*it)[i];
    const bool ok = [&] {
      if constexpr (std::is_same_v<T, std::string>)
        return entry.is_string();
      else
        return entry.is_number_unsigned() || (entry.is_number_integer() && entry.template get<std::int64_t>() >= 0);
    }();
    if (!ok) {
      return grid_error(std::string(key) + "[" + std::to_string(i) + "]: expected " +
                        (std::is_same_v<T, std::string> ? "a string" : "a non-negative integer"));
    }
    values.push_back(entry.template get<T>());
  }
  out = std::move(values);
  return {};
}

Result<Defence> parse_defence(const Json& entry, std::size_t i) {
  const std::string where = "defences[" + std::to_string(i) + "]";
  if (entry.is_string()) {
    auto defence = named_defence(entry.get<std::string>());
    if (!defence.ok()) return grid_error(where + ": " + defence.error().message);
    return defence;
  }
  if (!entry.is_object()) return grid_error(where + ": expected a name or an object");
  static const std::set<std::string> known = {"name", "code", "rule", "codec", "update", "worker_momentum", "lr"};
  for (const auto& [key, value] : entry.items()) {
    if (known.count(key) == 0) return grid_error(where + ": unknown key '" + key + "'");
  }
  Defence defence;
  const auto text = [&](const char* key, std::string& out) -> Status {
    const auto it = entry.find(key);
    if (it == entry.end()) return {};
    if (!it->is_string()) return grid_error(where + ": '" + key + "' must be a string");
    out = it->get<std::string>();
    return {};
  };
  BALLOT_TRY(text("name", defence.name));
  BALLOT_TRY(text("code", defence.code));
  BALLOT_TRY(text("rule", defence.rule));
  BALLOT_TRY(text("codec", defence.codec));
  if (entry.contains("update")) {
    std::string update;
    BALLOT_TRY(text("update", update));
    defence.update = update;
  }
  if (entry.contains("lr")) {
    std::string lr;
    BALLOT_TRY(text("lr", lr));
    defence.lr = lr;
  }
  if (const auto it = entry.find("worker_momentum"); it != entry.end()) {
    if (!it->is_number()) return grid_error(where + ": 'worker_momentum' must be a number");
    defence.worker_momentum = it->get<double>();
  }
  if (defence.name.empty()) return grid_error(where + ": a defence object needs a 'name'");
  return defence;
}

// "tune_lr": true | false | {"factors": [..], "rounds": R, "holdout": H}.
Status parse_tuning(const Json& value, std::optional<LrTuning>& out) {
  if (value.is_boolean()) {
    out = value.get<bool>() ? std::optional<LrTuning>(LrTuning{}) : std::nullopt;
    return {};
  }
  if (!value.is_object()) return grid_error("'tune_lr' must be true, false or an object");
  LrTuning tuning;
  for (const auto& [key, entry] : value.items()) {
    if (key == "factors") {
      if (!entry.is_array()) return grid_error("tune_lr: 'factors' must be an array of numbers");
      tuning.factors.clear();
      for (const auto& f : entry) {
        if (!f.is_number()) return grid_error("tune_lr: 'factors' must be an array of numbers");
        tuning.factors.push_back(f.get<double>());
      }
    } else if (key == "rounds" || key == "holdout") {
      if (!entry.is_number_unsigned()) return grid_error("tune_lr: '" + key + "' must be a non-negative integer");
      if (key == "rounds")
        tuning.rounds = entry.get<std::uint64_t>();
      else
        tuning.holdout = entry.get<std::size_t>();
    } else {
      return grid_error("tune_lr: unknown key '" + key + "'");
    }
  }
  out = tuning;
  return {};
}

}  // namespace

std::string defence_update(const Grid& grid, const Defence& defence) {
  return defence.update.value_or(grid.base.update);
}

Result<std::string> defence_lr(const Grid& grid, const Defence& defence) {
  if (defence.lr) return *defence.lr;
  if (!grid.lr_per_update) return grid.base.lr;
  return learning::default_lr_schedule(defence_update(grid, defence), grid.base.rounds);
}

std::string defence_lr_source(const Grid& grid, const Defence& defence) {
  if (defence.lr) return "defence";
  return grid.lr_per_update ? "default" : "base";
}

Result<Defence> named_defence(std::string_view text) {
  const std::string name = trim(text);
  if (name.empty()) return make_error(ErrorCode::kInvalidArgument, "empty defence name");
  Defence defence;
  defence.name = name;
  if (const auto slash = name.find('/'); slash != std::string::npos) {
    // The gradient path: RULE/CODEC, SGD with momentum 0.9 on the aggregate (the no-defence
    // baseline is "mean/fp32"). The momentum matches the sign path's 0.9 at the nodes — for the
    // mean it is the same average of past gradients — and without it the gradient path trailed
    // by 4-5 points at its best rate in the sweep of docs/evaluation.md.
    defence.rule = trim(std::string_view(name).substr(0, slash));
    defence.codec = trim(std::string_view(name).substr(slash + 1));
    if (defence.rule.empty() || defence.codec.empty()) {
      return make_error(ErrorCode::kInvalidArgument, "defence '" + name + "': expected RULE/CODEC");
    }
    defence.code = "identity";
    // DGC corrects momentum at the node, so its receiver applies plain SGD (the run refuses a
    // second momentum): the momentum is the codec's then.
    const auto codec_spec = Spec::parse(defence.codec);
    const bool node_momentum =
        codec_spec.ok() && codec_spec->name() == "dgc" && codec_spec->get_double("momentum", 0.9).value_or(0.9) > 0.0;
    defence.update = node_momentum ? "sgd" : "sgd:momentum=0.9";
    defence.worker_momentum = 0.0;
    return defence;
  }
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "signsgd-mv" || lower == "identity") {
    defence.code = "identity";
    return defence;
  }
  // "bernoulli r=2" is the report's spelling of the spec "bernoulli:r=2".
  std::string spec_text = name;
  if (lower.rfind("bernoulli ", 0) == 0) spec_text = "bernoulli:" + trim(std::string_view(name).substr(10));
  auto spec = Spec::parse(spec_text);
  if (!spec.ok()) return make_error(ErrorCode::kInvalidArgument, "defence '" + name + "': " + spec.error().message);
  defence.code = spec->to_string();
  if (spec->name() == "bernoulli") {
    auto r = spec->get_double("r", 2.0);
    if (!r.ok()) return make_error(ErrorCode::kInvalidArgument, "defence '" + name + "': " + r.error().message);
    if (spec->options().size() == 1 && spec->has("r")) {
      std::ostringstream shown;
      shown << "bernoulli r=" << *r;
      defence.name = shown.str();
    }
  }
  return defence;
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> entries;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const auto piece = trim(text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    // "key=value" right after a comma continues the previous spec's options.
    const auto eq = piece.find('=');
    const bool continuation = !entries.empty() && eq != std::string::npos && eq > 0 &&
                              std::all_of(piece.begin(), piece.begin() + static_cast<std::ptrdiff_t>(eq),
                                          [](unsigned char c) { return std::isalnum(c) || c == '_'; });
    if (continuation) {
      entries.back() += "," + piece;
    } else if (!piece.empty()) {
      entries.push_back(piece);
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return entries;
}

Status Grid::validate() const {
  if (attacks.empty() && !baseline) return grid_error("no attack and no baseline: nothing to run");
  if (defences.empty()) return grid_error("no defence");
  if (settings.empty()) return grid_error("no setting (n, b)");
  if (seeds.empty()) return grid_error("no seed");
  if (!(target_accuracy > 0.0 && target_accuracy <= 1.0)) return grid_error("target_accuracy must be in (0, 1]");
  if (protocol_deadline_ms == 0 || protocol_deadline_ms > kMaxProtocolDeadlineMs) {
    return grid_error("protocol_deadline_ms must be in [1, " + std::to_string(kMaxProtocolDeadlineMs) + "]");
  }
  {
    runtime::TrainingOptions check = base;
    check.attack = "none";
    check.attackers = 0;
    if (auto status = check.validate(); !status.ok()) return grid_error("base: " + status.error().message);
  }
  std::set<std::string> seen_attacks;
  for (std::size_t i = 0; i < attacks.size(); ++i) {
    const std::string where = "attacks[" + std::to_string(i) + "] '" + attacks[i] + "'";
    if (attacks::AttackSpec::parse(attacks[i]).ok() && attacks::AttackSpec::parse(attacks[i])->none())
      return grid_error(where + ": the attack-free run is the baseline (\"baseline\": true)");
    if (auto status = check_attack(attacks[i]); !status.ok()) return grid_error(where + ": " + status.error().message);
    if (!seen_attacks.insert(attacks[i]).second) return grid_error(where + ": listed twice");
  }
  std::set<std::string> seen_defences;
  for (std::size_t i = 0; i < defences.size(); ++i) {
    const Defence& d = defences[i];
    const std::string where = "defences[" + std::to_string(i) + "] '" + d.name + "'";
    if (d.name.empty()) return grid_error("defences[" + std::to_string(i) + "]: empty name");
    if (!seen_defences.insert(d.name).second) return grid_error(where + ": name listed twice");
    for (std::size_t j = 0; j < i; ++j) {
      const Defence& e = defences[j];
      if (e.code == d.code && e.rule == d.rule && (d.rule == "vote" || e.codec == d.codec) && e.update == d.update &&
          e.worker_momentum == d.worker_momentum && e.lr == d.lr) {
        return grid_error(where + ": the same defence as defences[" + std::to_string(j) + "] '" + e.name + "'");
      }
    }
    if (auto spec = Spec::parse(d.code); !spec.ok()) return grid_error(where + ": code: " + spec.error().message);
    if (d.rule != "vote") {
      if (auto rule = robust::make_aggregator(d.rule); !rule.ok())
        return grid_error(where + ": rule: " + rule.error().message);
      if (auto codec = coding::make_codec(d.codec); !codec.ok())
        return grid_error(where + ": codec: " + codec.error().message);
    } else {
      if (d.codec != Defence{}.codec) {
        return grid_error(where + ": codec '" + d.codec +
                          "' applies to the gradient path only (rule 'vote' sends 1-bit signs)");
      }
      // A code that builds for no setting of the grid is a typo, not an inapplicable defence.
      std::optional<std::string> first_reason;
      bool builds = false;
      for (const auto& setting : settings) {
        auto spec = code_spec_for(d.code, setting.byzantine);
        if (!spec.ok()) return grid_error(where + ": code: " + spec.error().message);
        auto code = coding::make_allocation_matrix(*spec, setting.nodes, seeds.front());
        if (code.ok()) {
          builds = true;
          break;
        }
        if (!first_reason) first_reason = code.error().message;
        if (code.error().message.find("unknown") != std::string::npos) break;
      }
      if (!builds) return grid_error(where + ": code: " + first_reason.value_or("does not build"));
    }
    if (d.update) {
      if (auto update = Spec::parse(*d.update); !update.ok())
        return grid_error(where + ": update: " + update.error().message);
    }
    if (d.lr) {
      if (auto lr = learning::LrSchedule::parse(*d.lr); !lr.ok())
        return grid_error(where + ": lr: " + lr.error().message);
    } else if (auto lr = defence_lr(*this, d); !lr.ok()) {
      return grid_error(where + ": no default learning rate for update '" + defence_update(*this, d) +
                        "' (give the defence an lr): " + lr.error().message);
    }
    if (d.worker_momentum && !(*d.worker_momentum >= 0.0 && *d.worker_momentum < 1.0)) {
      return grid_error(where + ": worker_momentum must be in [0, 1)");
    }
  }
  std::set<Setting> seen_settings;
  for (std::size_t i = 0; i < settings.size(); ++i) {
    const Setting s = settings[i];
    const std::string where = "settings[" + std::to_string(i) + "] (n = " + std::to_string(s.nodes) +
                              ", b = " + std::to_string(s.byzantine) + ")";
    if (s.nodes == 0 || s.nodes > coding::AllocationMatrix::kMaxNodes) return grid_error(where + ": n out of range");
    if (s.byzantine > (s.nodes - 1) / 2) return grid_error(where + ": needs b < n/2");  // 2b < n, without overflow
    if (!seen_settings.insert(s).second) return grid_error(where + ": listed twice");
  }
  std::set<std::uint64_t> seen_seeds;
  for (auto seed : seeds) {
    if (!seen_seeds.insert(seed).second) return grid_error("seed " + std::to_string(seed) + " listed twice");
  }
  if (tune_lr) {
    if (tune_lr->factors.empty()) return grid_error("tune_lr: no factor");
    std::set<double> seen_factors;
    for (double f : tune_lr->factors) {
      if (!(f > 0.0) || !std::isfinite(f)) return grid_error("tune_lr: factors must be positive and finite");
      if (!seen_factors.insert(f).second) return grid_error("tune_lr: factor " + std::to_string(f) + " listed twice");
    }
  }
  if (attacker_choice != "random" && attacker_choice != "worst") {
    // A node list: its syntax now (a typo would otherwise make every attack cell "not
    // applicable"); whether its indices fit a setting's n is decided per cell.
    if (auto listed = attacks::parse_indices(attacker_choice, coding::AllocationMatrix::kMaxNodes); !listed.ok()) {
      return grid_error("attacker_choice '" + attacker_choice + "': random | worst | a node list (" +
                        listed.error().message + ")");
    }
  }
  return {};
}

Result<Grid> parse_grid(std::string_view json_text, Grid grid) {
  if (!json_nesting_ok(json_text))
    return grid_error("arrays and objects nested deeper than " + std::to_string(kMaxJsonNesting) + " levels");
  const Json root = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return grid_error("not valid JSON");
  if (!root.is_object()) return grid_error("the top level must be an object");
  static const std::set<std::string> known = {"base",
                                              "attacks",
                                              "defences",
                                              "settings",
                                              "nodes",
                                              "byzantine",
                                              "seeds",
                                              "attacker_choice",
                                              "target_accuracy",
                                              "baseline",
                                              "protocol_deadline_ms",
                                              "tune_lr"};
  for (const auto& [key, value] : root.items()) {
    if (known.count(key) == 0) return grid_error("unknown key '" + key + "'");
  }
  if (const auto base = root.find("base"); base != root.end()) {
    if (!base->is_object()) return grid_error("'base' must be an object");
    // Dimensions of the grid are not base options.
    for (const char* key :
         {"nodes", "byzantine", "code", "rule", "codec", "seed", "attack", "attackers", "attacker_choice"}) {
      if (base->contains(key)) return grid_error(std::string("base: '") + key + "' is set by the grid, not the base");
    }
    // The base uses the cluster config's "training" syntax; start from the defaults' values.
    Json training = Json::parse(runtime::to_json(runtime::ClusterConfig{.training = grid.base}))["training"];
    for (const auto& [key, value] : base->items()) training[key] = value;
    auto config = runtime::parse_cluster_config(Json{{"training", training}}.dump());
    if (!config.ok()) return grid_error("base: " + config.error().message);
    grid.base = config->training;
    // A learning rate in the base is the user's choice for every defence without its own.
    if (base->contains("lr")) grid.lr_per_update = false;
  }
  BALLOT_TRY(read_array(root, "attacks", grid.attacks));
  if (const auto defences = root.find("defences"); defences != root.end()) {
    if (!defences->is_array()) return grid_error("'defences' must be an array");
    grid.defences.clear();
    for (std::size_t i = 0; i < defences->size(); ++i) {
      BALLOT_ASSIGN_OR_RETURN(auto defence, parse_defence((*defences)[i], i));
      grid.defences.push_back(std::move(defence));
    }
  }
  const bool has_settings = root.contains("settings");
  const bool has_cross = root.contains("nodes") || root.contains("byzantine");
  if (has_settings && has_cross) return grid_error("give either 'settings' or 'nodes' × 'byzantine', not both");
  if (has_settings) {
    const Json& settings = root["settings"];
    if (!settings.is_array()) return grid_error("'settings' must be an array");
    grid.settings.clear();
    for (std::size_t i = 0; i < settings.size(); ++i) {
      const Json& entry = settings[i];
      const std::string where = "settings[" + std::to_string(i) + "]";
      if (!entry.is_object() || entry.size() != 2 || !entry.contains("n") || !entry.contains("b") ||
          !entry["n"].is_number_unsigned() || !entry["b"].is_number_unsigned()) {
        return grid_error(where + ": expected {\"n\": N, \"b\": B} with non-negative integers");
      }
      grid.settings.push_back({entry["n"].get<std::size_t>(), entry["b"].get<std::size_t>()});
    }
  }
  if (has_cross) {
    std::vector<std::size_t> nodes, byzantine;
    BALLOT_TRY(read_array(root, "nodes", nodes));
    BALLOT_TRY(read_array(root, "byzantine", byzantine));
    if (nodes.empty() || byzantine.empty()) return grid_error("'nodes' and 'byzantine' go together, both non-empty");
    grid.settings.clear();
    for (auto n : nodes) {
      for (auto b : byzantine) grid.settings.push_back({n, b});
    }
  }
  BALLOT_TRY(read_array(root, "seeds", grid.seeds));
  if (const auto it = root.find("attacker_choice"); it != root.end()) {
    if (!it->is_string()) return grid_error("'attacker_choice' must be a string");
    grid.attacker_choice = it->get<std::string>();
  }
  if (const auto it = root.find("target_accuracy"); it != root.end()) {
    if (!it->is_number()) return grid_error("'target_accuracy' must be a number");
    grid.target_accuracy = it->get<double>();
  }
  if (const auto it = root.find("baseline"); it != root.end()) {
    if (!it->is_boolean()) return grid_error("'baseline' must be true or false");
    grid.baseline = it->get<bool>();
  }
  if (const auto it = root.find("protocol_deadline_ms"); it != root.end()) {
    if (!it->is_number_unsigned() || it->get<std::uint64_t>() > kMaxProtocolDeadlineMs) {
      return grid_error("'protocol_deadline_ms' must be a whole number of milliseconds in [1, " +
                        std::to_string(kMaxProtocolDeadlineMs) + "]");
    }
    grid.protocol_deadline_ms = static_cast<std::uint32_t>(it->get<std::uint64_t>());
  }
  if (const auto it = root.find("tune_lr"); it != root.end()) {
    BALLOT_TRY(parse_tuning(*it, grid.tune_lr));
  }
  BALLOT_TRY(grid.validate());
  return grid;
}

Result<Grid> load_grid(const std::string& path, Grid defaults) {
  // A directory, a device or a huge file is an error naming it (as for cluster files).
  auto bytes = read_file(path, runtime::kMaxClusterConfigBytes, "grid file");
  if (!bytes.ok()) return std::move(bytes).error();
  auto grid =
      parse_grid(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()), std::move(defaults));
  if (!grid.ok()) {
    auto error = std::move(grid).error();
    error.message += " (" + path + ")";
    return error;
  }
  return grid;
}

Grid paper_preset(std::uint64_t rounds) {
  Grid grid;
  grid.base.data = "fashion-mnist";
  grid.base.model = "mlp:hidden=128";
  // The default `ballot train` update (Signum through the code, x ← x − η·v) rather than the
  // paper's server-side heavy ball at lr 1e-4, which does not get far in a few hundred rounds;
  // docs/evaluation.md says what was used.
  grid.base.update = "sign:wd=0";
  grid.base.worker_momentum = 0.9;
  // The sign rule's default schedule (lr 0.001 decaying to 5% by the last round); base.lr only
  // shows it, as lr_per_update takes it from the update rule.
  grid.base.lr = learning::default_lr_schedule(grid.base.update, rounds).value_or(grid.base.lr);
  grid.lr_per_update = true;
  grid.base.partition_size = 32;
  grid.base.rounds = rounds;
  grid.base.eval_every = std::max<std::uint64_t>(1, rounds / 10);
  grid.base.eval_examples = 10000;
  grid.attacks = {"reverse"};
  for (const char* name : {"signSGD-MV", "bernoulli r=2", "bernoulli r=3", "deterministic"}) {
    grid.defences.push_back(*named_defence(name));
  }
  grid.settings = {{5, 1}, {9, 2}, {15, 3}, {5, 2}, {9, 3}, {15, 6}};
  // Three seeds: each draws its own Byzantine set, Bernoulli code and batches, so the sd shows how
  // much of a gap is luck.
  grid.seeds = {1, 2, 3};
  grid.attacker_choice = "random";
  grid.target_accuracy = 0.8;
  grid.baseline = true;
  return grid;
}

std::string baseline_key(const runtime::TrainingOptions& options) {
  runtime::TrainingOptions key = options;
  if (auto spec = Spec::parse(key.code); spec.ok() && spec->name() == "deterministic" && !spec->has("b")) {
    key.code = "deterministic:b=" + std::to_string(key.byzantine);
  }
  // Without attackers the fault budget changes nothing in the lockstep engine (no vote is ever
  // absent) except through the deterministic code, pinned above.
  key.byzantine = 0;
  return runtime::to_json(runtime::ClusterConfig{.training = key});
}

std::vector<Cell> expand(const Grid& grid) {
  std::vector<Cell> cells;
  std::map<std::string, std::size_t> baselines;
  for (const auto& setting : grid.settings) {
    for (std::size_t d = 0; d < grid.defences.size(); ++d) {
      std::vector<std::string> attacks;
      if (grid.baseline) attacks.push_back("none");
      attacks.insert(attacks.end(), grid.attacks.begin(), grid.attacks.end());
      for (const auto& attack : attacks) {
        for (auto seed : grid.seeds) {
          Cell cell;
          cell.setting = setting;
          cell.defence = d;
          cell.attack = attack;
          cell.seed = seed;
          cell.options = cell_options(grid, grid.defences[d], setting, attack, seed);
          cell.not_applicable = inapplicable(cell.options);
          cell.index = cells.size();
          if (cell.baseline() && !cell.not_applicable) {
            const auto [it, first] = baselines.emplace(baseline_key(cell.options), cell.index);
            if (!first) cell.same_as = it->second;
          }
          cells.push_back(std::move(cell));
        }
      }
    }
  }
  return cells;
}

}  // namespace ballot::evaluation

#include "evaluation/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "core/spec.h"
#include "learning/optimizer.h"
#include "runtime/cluster_config.h"

namespace ballot::evaluation {
namespace {

using Json = nlohmann::json;

Json options_json(const runtime::TrainingOptions& options) {
  return Json::parse(runtime::to_json(runtime::ClusterConfig{.training = options}))["training"];
}

Json defence_json(const Defence& d) {
  Json out = {{"name", d.name}, {"code", d.code}, {"rule", d.rule}, {"codec", d.codec}};
  if (d.update) out["update"] = *d.update;
  if (d.worker_momentum) out["worker_momentum"] = *d.worker_momentum;
  if (d.lr) out["lr"] = *d.lr;
  return out;
}

std::string fixed(double value, int decimals) {
  char text[48];
  std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  return text;
}

std::string attack_label(const std::string& attack) { return attack == "none" ? "no attack" : attack; }

std::string setting_label(Setting s) {
  return "n = " + std::to_string(s.nodes) + ", b = " + std::to_string(s.byzantine);
}

std::string setting_file(Setting s) { return "n" + std::to_string(s.nodes) + "_b" + std::to_string(s.byzantine); }

// A sweep candidate's state: "done", "not applicable", "failed", "cancelled" or "not run".
std::string candidate_status(const LrCandidate& c) { return c.done ? "done" : c.status; }

// A cell of a table when nothing finished: why, briefly (the reasons are listed below the tables).
std::string missing(const Aggregate& a) {
  switch (a.first_status) {
    case CellStatus::kNotApplicable:
      return "n/a";
    case CellStatus::kFailed:
      return "failed";
    case CellStatus::kCancelled:
      return "cancelled";
    case CellStatus::kDone:
      break;
  }
  return "-";
}

std::string percent_stats(const Stats& s, int decimals = 1) {
  std::string text = fixed(100.0 * s.mean, decimals);
  if (s.count > 1) text += " ± " + fixed(100.0 * s.sd, decimals);
  return text;
}

const Aggregate* find(std::span<const Aggregate> aggregates, Setting s, std::size_t defence,
                      const std::string& attack) {
  for (const auto& a : aggregates) {
    if (a.setting == s && a.defence == defence && a.attack == attack) return &a;
  }
  return nullptr;
}

std::vector<std::string> columns(const Grid& grid) {
  std::vector<std::string> attacks;
  if (grid.baseline) attacks.push_back("none");
  attacks.insert(attacks.end(), grid.attacks.begin(), grid.attacks.end());
  return attacks;
}

std::string table_row(const std::vector<std::string>& cells) {
  std::string row = "|";
  for (const auto& c : cells) row += " " + c + " |";
  return row + "\n";
}

std::string table_rule(std::size_t count) {
  std::string row = "|";
  for (std::size_t i = 0; i < count; ++i) row += i == 0 ? " --- |" : " ---: |";
  return row + "\n";
}

// Markdown table cells must not contain '|' (robust pipelines do not, but user names might).
std::string md(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

Stats mean_sd(std::span<const double> values) {
  Stats s;
  s.count = values.size();
  if (values.empty()) return s;
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(values.size());
  if (values.size() > 1) {
    double squares = 0;
    for (double v : values) squares += (v - s.mean) * (v - s.mean);
    s.sd = std::sqrt(squares / static_cast<double>(values.size() - 1));
  }
  return s;
}

std::vector<Aggregate> aggregate(const GridResult& result) {
  std::vector<Aggregate> out;
  std::map<std::tuple<std::size_t, std::size_t, std::size_t, std::string>, std::size_t> index;
  std::vector<std::vector<std::size_t>> members;
  for (const auto& cell : result.cells) {
    const auto key = std::make_tuple(cell.setting.nodes, cell.setting.byzantine, cell.defence, cell.attack);
    auto [it, fresh] = index.emplace(key, out.size());
    if (fresh) {
      Aggregate a;
      a.setting = cell.setting;
      a.defence = cell.defence;
      a.attack = cell.attack;
      out.push_back(std::move(a));
      members.emplace_back();
    }
    members[it->second].push_back(cell.index);
  }
  for (std::size_t k = 0; k < out.size(); ++k) {
    Aggregate& a = out[k];
    std::vector<double> accuracy, rounds, changed, coordinates, redundancy;
    std::vector<double> rejected, events, quarantined, proofs, missing_per_round, slowest;
    std::map<std::uint64_t, std::pair<double, std::size_t>> curve;
    for (auto i : members[k]) {
      const CellResult& r = result.results[i];
      ++a.seeds;
      if (r.status != CellStatus::kDone) {
        if (r.status != CellStatus::kNotApplicable) ++a.unfinished;
        if (a.reason.empty() && a.first_status == CellStatus::kDone) {
          a.first_status = r.status;
          a.reason = r.reason.empty() ? cell_status_name(r.status) : r.reason;
        }
        continue;
      }
      ++a.done;
      accuracy.push_back(r.final_accuracy);
      changed.push_back(r.changed_fraction());
      coordinates.push_back(r.changed_coordinate_fraction());
      if (r.defences) {
        const DefenceOutcome& d = *r.defences;
        rejected.push_back(static_cast<double>(d.rejected_messages));
        events.push_back(static_cast<double>(d.misbehaviour_events));
        quarantined.push_back(static_cast<double>(d.quarantined_byzantine));
        proofs.push_back(static_cast<double>(d.equivocation_proofs));
        missing_per_round.push_back(r.rounds ? static_cast<double>(d.missing_votes) / static_cast<double>(r.rounds)
                                             : 0.0);
        slowest.push_back(d.slowest_round_seconds);
      }
      redundancy.push_back(r.redundancy);
      if (r.rounds_to_target) rounds.push_back(static_cast<double>(*r.rounds_to_target));
      for (const auto& p : r.curve) {
        auto& [sum, count] = curve[p.round];
        sum += p.accuracy;
        ++count;
      }
    }
    a.accuracy = mean_sd(accuracy);
    a.rounds_to_target = mean_sd(rounds);
    a.reached = rounds.size();
    a.changed_fraction = mean_sd(changed);
    a.changed_coordinates = mean_sd(coordinates);
    a.compared = changed.size();
    a.with_defences = rejected.size();
    a.rejected_messages = mean_sd(rejected);
    a.misbehaviour_events = mean_sd(events);
    a.quarantined_byzantine = mean_sd(quarantined);
    a.equivocation_proofs = mean_sd(proofs);
    a.missing_votes_per_round = mean_sd(missing_per_round);
    a.slowest_round_seconds = mean_sd(slowest);
    a.redundancy = mean_sd(redundancy);
    for (const auto& [round, sum_count] : curve) {
      if (sum_count.second == a.done) a.curve.emplace_back(static_cast<double>(round), sum_count.first / a.done);
    }
  }
  return out;
}

std::optional<WorstCase> worst_case(std::span<const Aggregate> aggregates, Setting setting, std::size_t defence) {
  WorstCase worst;
  bool any = false;
  for (const auto& a : aggregates) {
    if (a.setting != setting || a.defence != defence || a.attack == "none") continue;
    if (a.done == 0) {
      (a.unfinished > 0 ? worst.unfinished : worst.not_applicable).push_back(a.attack);
      continue;
    }
    // A mean over fewer seeds: some failed, or the attack applied to only some of them.
    if (a.done < a.seeds) worst.complete = false;
    if (!any || a.accuracy.mean < worst.accuracy) {
      worst.accuracy = a.accuracy.mean;
      worst.attack = a.attack;
    }
    any = true;
  }
  if (!any) return std::nullopt;
  if (!worst.unfinished.empty()) worst.complete = false;
  return worst;
}

std::vector<Figure> make_figures(const GridResult& result, std::span<const Aggregate> aggregates) {
  const Grid& grid = result.grid;
  std::vector<Figure> figures;
  const auto attacks = columns(grid);
  // Every figure draws defence d in palette colour d, so a defence looks the same everywhere.
  const auto defence_series = [&](std::size_t d) { return Series{grid.defences[d].name, {}, false, d}; };
  for (const auto& setting : grid.settings) {
    // A panel per attack (the attack-free run first), a line per defence: the defences are
    // compared where they are compared in the tables, and the attack-free panel shows at once
    // whether they trained equally well without an attacker.
    std::vector<Plot> panels;
    for (const auto& attack : attacks) {
      Plot plot;
      plot.title = attack_label(attack);
      plot.x_label = "round";
      plot.y_label = "test accuracy (%)";
      plot.y_min = 0.0;
      plot.y_max = 100.0;
      plot.x_min = 0.0;
      plot.x_max = static_cast<double>(grid.base.rounds);
      for (std::size_t d = 0; d < grid.defences.size(); ++d) {
        const Aggregate* a = find(aggregates, setting, d, attack);
        if (a == nullptr || a->done == 0) continue;
        Series series = defence_series(d);
        for (const auto& [round, accuracy] : a->curve) series.points.emplace_back(round, 100.0 * accuracy);
        plot.series.push_back(std::move(series));
      }
      if (plot.series.empty()) plot.title += " (did not run)";
      panels.push_back(std::move(plot));
    }
    FigureOptions options;
    options.title = "Test accuracy against rounds, " + setting_label(setting);
    options.columns = std::min<std::size_t>(panels.size(), 3);
    figures.push_back({"figures/accuracy_" + setting_file(setting) + ".svg",
                       "Test accuracy against rounds, " + setting_label(setting) +
                           " (a panel per attack, a line per defence, mean over seeds)",
                       render_figure(panels, options)});
  }
  if (grid.attacks.empty()) return figures;

  std::vector<std::size_t> ns;
  for (const auto& s : grid.settings) {
    if (std::find(ns.begin(), ns.end(), s.nodes) == ns.end()) ns.push_back(s.nodes);
  }
  const auto settings_of = [&](std::size_t n) {
    std::vector<Setting> settings;
    for (const auto& s : grid.settings) {
      if (s.nodes == n) settings.push_back(s);
    }
    std::sort(settings.begin(), settings.end());
    return settings;
  };
  {
    std::vector<Plot> panels;
    for (auto n : ns) {
      Plot plot;
      plot.title = "n = " + std::to_string(n);
      plot.x_label = "Byzantine nodes b";
      plot.y_label = "worst-case test accuracy (%)";
      // The data's range (not 0-100): the gaps between defences are a few points.
      const auto settings = settings_of(n);
      plot.x_min = 0.0;
      plot.x_max = static_cast<double>(settings.back().byzantine) + 1.0;
      for (std::size_t d = 0; d < grid.defences.size(); ++d) {
        Series series = defence_series(d);
        for (const auto& s : settings) {
          if (auto worst = worst_case(aggregates, s, d)) {
            series.points.emplace_back(static_cast<double>(s.byzantine), 100.0 * worst->accuracy);
          }
        }
        if (!series.points.empty()) plot.series.push_back(std::move(series));
      }
      panels.push_back(std::move(plot));
    }
    FigureOptions options;
    options.title = "Worst case over attacks against the number of Byzantine nodes";
    options.columns = std::min<std::size_t>(panels.size(), 3);
    figures.push_back({"figures/worst_case.svg", "Worst-case test accuracy over the attacks against b, per defence",
                       render_figure(panels, options)});
  }
  {
    // ByzFL's accuracy against f: a panel per (n, attack), a line per defence.
    std::vector<Plot> panels;
    for (auto n : ns) {
      const auto settings = settings_of(n);
      for (const auto& attack : grid.attacks) {
        Plot plot;
        plot.title = attack + (ns.size() > 1 ? ", n = " + std::to_string(n) : "");
        plot.x_label = "Byzantine nodes b";
        plot.y_label = "test accuracy (%)";
        plot.x_min = 0.0;
        plot.x_max = static_cast<double>(settings.back().byzantine) + 1.0;
        for (std::size_t d = 0; d < grid.defences.size(); ++d) {
          Series series = defence_series(d);
          for (const auto& s : settings) {
            const Aggregate* a = find(aggregates, s, d, attack);
            if (a != nullptr && a->done > 0)
              series.points.emplace_back(static_cast<double>(s.byzantine), 100.0 * a->accuracy.mean);
          }
          if (!series.points.empty()) plot.series.push_back(std::move(series));
        }
        panels.push_back(std::move(plot));
      }
    }
    FigureOptions options;
    options.title = "Final test accuracy against the number of Byzantine nodes, per attack";
    options.columns = std::min<std::size_t>(panels.size(), 3);
    figures.push_back({"figures/accuracy_vs_b.svg",
                       "Final test accuracy against b, a panel per attack, a line per defence (mean over seeds)",
                       render_figure(panels, options)});
  }
  {
    // ByzFL's heat map: worst-case accuracy per defence (rows) and b (columns), one map per n.
    std::vector<HeatMap> maps;
    for (auto n : ns) {
      HeatMap map;
      map.title = "n = " + std::to_string(n);
      map.x_label = "Byzantine nodes b";
      map.y_label = "defence";
      for (const auto& s : settings_of(n)) map.columns.push_back("b = " + std::to_string(s.byzantine));
      for (std::size_t d = 0; d < grid.defences.size(); ++d) {
        map.rows.push_back(grid.defences[d].name);
        std::vector<std::optional<double>> row;
        for (const auto& s : settings_of(n)) {
          const auto worst = worst_case(aggregates, s, d);
          row.push_back(worst ? std::optional<double>(100.0 * worst->accuracy) : std::nullopt);
        }
        map.values.push_back(std::move(row));
      }
      maps.push_back(std::move(map));
    }
    // One colour scale for every map, so that a shade means the same accuracy for every n.
    std::optional<double> lo, hi;
    for (const auto& map : maps) {
      for (const auto& row : map.values) {
        for (const auto& v : row) {
          if (!v) continue;
          lo = std::min(lo.value_or(*v), *v);
          hi = std::max(hi.value_or(*v), *v);
        }
      }
    }
    for (auto& map : maps) {
      map.min = lo;
      map.max = hi;
    }
    figures.push_back({"figures/worst_case_heatmap.svg",
                       "Worst-case test accuracy (%) over the attacks, per defence and b (darker is better)",
                       render_heat_maps(maps, "Worst-case test accuracy (%) over the attacks")});
  }
  return figures;
}

std::string results_json(const GridResult& result) {
  const Grid& grid = result.grid;
  Json defences = Json::array();
  for (const auto& d : grid.defences) defences.push_back(defence_json(d));
  Json settings = Json::array();
  for (const auto& s : grid.settings) settings.push_back({{"n", s.nodes}, {"b", s.byzantine}});
  Json root = {
      {"grid",
       {{"base", options_json(grid.base)},
        {"attacks", grid.attacks},
        {"defences", defences},
        {"settings", settings},
        {"seeds", grid.seeds},
        {"attacker_choice", grid.attacker_choice},
        {"target_accuracy", grid.target_accuracy},
        {"baseline", grid.baseline},
        {"protocol_deadline_ms", grid.protocol_deadline_ms},
        {"lr_per_update", grid.lr_per_update}}},
      {"jobs", result.jobs},
      {"seconds", result.seconds},
      {"cancelled", result.cancelled},
  };
  Json cells = Json::array();
  for (const auto& cell : result.cells) {
    const CellResult& r = result.results[cell.index];
    Json curve = Json::array();
    for (const auto& p : r.curve) curve.push_back({p.round, p.accuracy});
    Json entry = {
        {"index", cell.index},
        {"n", cell.setting.nodes},
        {"b", cell.setting.byzantine},
        {"defence", grid.defences[cell.defence].name},
        {"attack", cell.attack},
        {"seed", cell.seed},
        {"baseline", cell.baseline()},
        {"status", cell_status_name(r.status)},
        {"options", options_json(cell.options)},
    };
    if (cell.same_as) entry["same_as"] = *cell.same_as;
    if (!r.reason.empty()) entry["reason"] = r.reason;
    if (r.status == CellStatus::kDone || r.status == CellStatus::kCancelled) {
      entry["byzantine_nodes"] = r.byzantine_nodes;
      entry["redundancy"] = r.redundancy;
      entry["final_accuracy"] = r.final_accuracy;
      entry["final_loss"] = r.final_loss;
      entry["rounds"] = r.rounds;
      entry["engine"] = "lockstep";
      entry["rounds_changed"] = r.rounds_changed;
      entry["changed_fraction"] = r.changed_fraction();
      entry["changed_coordinates_per_round"] = r.changed_coordinates;
      if (r.defences) {
        const DefenceOutcome& d = *r.defences;
        entry["defences"] = {{"rejected_messages", d.rejected_messages},
                             {"misbehaviour_events", d.misbehaviour_events},
                             {"quarantined", d.quarantined},
                             {"quarantined_byzantine", d.quarantined_byzantine},
                             {"equivocation_proofs", d.equivocation_proofs},
                             {"missing_votes", d.missing_votes},
                             {"slowest_round_seconds", d.slowest_round_seconds}};
      }
      entry["dimension"] = r.dimension;
      entry["upload_bytes_per_round"] = r.upload_bytes;
      entry["upload_bytes_exact"] = r.upload_exact;
      entry["download_bytes_per_round"] = r.download_bytes;
      entry["rounds_to_target"] = r.rounds_to_target ? Json(*r.rounds_to_target) : Json("never");
      entry["seconds"] = r.seconds;
      entry["curve"] = curve;
    }
    cells.push_back(std::move(entry));
  }
  root["cells"] = std::move(cells);
  Json tuning = Json::array();
  for (const auto& sweep : result.tuning) {
    Json candidates = Json::array();
    for (const auto& c : sweep.candidates) {
      Json entry = {{"factor", c.factor}, {"lr", c.schedule}, {"status", candidate_status(c)}};
      if (c.done) entry["holdout_accuracy"] = c.accuracy;
      if (!c.done && !c.reason.empty()) entry["reason"] = c.reason;
      candidates.push_back(std::move(entry));
    }
    Json entry = {{"defence", grid.defences[sweep.defence].name},
                  {"untuned_lr", sweep.untuned},
                  {"untuned_source", sweep.source},
                  {"n", sweep.setting.nodes},
                  {"b", sweep.setting.byzantine},
                  {"seed", sweep.seed},
                  {"rounds", sweep.rounds},
                  {"holdout", sweep.holdout},
                  {"candidates", candidates},
                  {"at_edge", sweep.at_edge}};
    entry["chosen_lr"] = sweep.chosen ? Json(grid.defences[sweep.defence].lr.value_or(sweep.untuned)) : Json(nullptr);
    tuning.push_back(std::move(entry));
  }
  root["tuning"] = std::move(tuning);
  // Strings from the command line or from error messages may hold invalid UTF-8: replace it
  // rather than throw after the whole grid has run.
  return root.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
}

namespace {

// The worst case of (setting, defence) as the tables print it: the value, `*` when it is over
// fewer seeds than the grid has, and the attacks it is not over (in full) or `†` (short); without
// a value, "did not finish" when an attack that applies failed or was cancelled for every seed it
// applied to, else "n/a".
std::string worst_text(std::span<const Aggregate> aggregates, Setting setting, std::size_t defence, bool full) {
  const auto worst = worst_case(aggregates, setting, defence);
  if (!worst) {
    for (const auto& a : aggregates) {
      if (a.setting == setting && a.defence == defence && a.attack != "none" && a.unfinished > 0) {
        return "did not finish";
      }
    }
    return "n/a";
  }
  const std::string value = fixed(100.0 * worst->accuracy, 1);
  const std::string seeds = worst->complete ? "" : "*";
  if (!full) return value + seeds + (worst->partial() ? "†" : "");
  std::string detail = md(worst->attack);
  const auto name = [&](const char* what, const std::vector<std::string>& attacks) {
    for (std::size_t i = 0; i < attacks.size(); ++i)
      detail += (i == 0 ? "; " + std::string(what) + ": " : ", ") + md(attacks[i]);
  };
  name("n/a", worst->not_applicable);
  name("did not finish", worst->unfinished);
  return "**" + value + "** (" + detail + ")" + seeds;
}

// Protocol attacks act on the wire: what counts there is what the defences did. Empty when the
// grid has no such cell for `setting`.
std::string defences_table(const Grid& grid, std::span<const Aggregate> aggregates, Setting setting) {
  const auto stat = [](const Stats& s, int digits) {
    return fixed(s.mean, digits) + (s.sd > 0 ? " ± " + fixed(s.sd, digits) : "");
  };
  std::string rows;
  for (const auto& a : aggregates) {
    if (a.setting != setting || a.with_defences == 0) continue;
    rows += table_row(
        {md(grid.defences[a.defence].name), md(attack_label(a.attack)),
         percent_stats(a.accuracy) + (a.done < a.seeds ? "*" : ""), stat(a.rejected_messages, 1),
         stat(a.misbehaviour_events, 1), stat(a.quarantined_byzantine, 1) + " of " + std::to_string(setting.byzantine),
         stat(a.equivocation_proofs, 1), stat(a.missing_votes_per_round, 2), stat(a.slowest_round_seconds, 2)});
  }
  if (rows.empty()) return "";
  const std::vector<std::string> head = {"defence",
                                         "attack",
                                         "final accuracy (%)",
                                         "messages rejected by the server",
                                         "misbehaviour events",
                                         "Byzantine nodes quarantined",
                                         "equivocation proofs",
                                         "votes missing per round",
                                         "longest round (s, virtual)"};
  return "\nProtocol attacks (real signed envelopes, verifiers and quarantine; round deadline " +
         std::to_string(grid.protocol_deadline_ms) +
         " ms of virtual time) — what the defences did, mean over seeds:\n\n" + table_row(head) +
         table_rule(head.size()) + rows;
}

// What a defence's cells run with, read from the cells themselves (after tuning).
struct DefenceSetup {
  const runtime::TrainingOptions* options = nullptr;  // of the defence's first cell
  const CellResult* measured = nullptr;               // a cell that ran (bytes), if any
  std::size_t download_bytes = 0;  // per round, over the rounds of every cell that ran (sparse decisions vary)
};

DefenceSetup setup_of(const GridResult& result, std::size_t defence) {
  DefenceSetup out;
  double download = 0.0, rounds = 0.0;
  for (const auto& cell : result.cells) {
    if (cell.defence != defence) continue;
    if (out.options == nullptr) out.options = &cell.options;
    const CellResult& r = result.results[cell.index];
    if (out.measured == nullptr && r.upload_bytes > 0) out.measured = &r;
    if (r.upload_bytes > 0 && r.rounds > 0) {
      download += static_cast<double>(r.download_bytes) * static_cast<double>(r.rounds);
      rounds += static_cast<double>(r.rounds);
    }
  }
  if (out.measured != nullptr) {
    out.download_bytes =
        rounds > 0 ? static_cast<std::size_t>(std::ceil(download / rounds)) : out.measured->download_bytes;
  }
  return out;
}

std::string bytes_text(std::size_t bytes) {
  if (bytes >= 10 * 1024) return fixed(static_cast<double>(bytes) / 1024.0, 1) + " KiB";
  return std::to_string(bytes) + " B";
}

// The update rule's own momentum, from its canonical spec.
std::string server_momentum(const std::string& update) {
  auto spec = Spec::parse(update);
  if (!spec.ok()) return "?";
  double value = 0.0;
  if (spec->name() == "sgd" || spec->name() == "heavyball") {
    value = spec->get_double("momentum", spec->name() == "heavyball" ? learning::kHeavyBallVoteOptions.momentum : 0.0)
                .value_or(0.0);
  } else if (spec->name() == "signum") {
    value = spec->get_double("beta", 0.9).value_or(0.0);
  }
  return value > 0.0 ? fixed(value, 2) : "none";
}

std::string lr_origin(const GridResult& result, std::size_t defence) {
  for (const auto& sweep : result.tuning) {
    if (sweep.defence != defence) continue;
    if (!sweep.chosen) return "untuned (no sweep run finished)";
    char factor[32];
    std::snprintf(factor, sizeof(factor), "%g", sweep.candidates[*sweep.chosen].factor);
    return "tuned: ×" + std::string(factor) + " the " +
           (sweep.source == "default" ? "update rule's default" : "grid's") + " rate";
  }
  const std::string source = defence_lr_source(result.grid, result.grid.defences[defence]);
  if (source == "defence") return "the defence's own";
  if (source == "base") return "given for the grid";
  return "the update rule's default";
}

// Everything that differs between defences, so that a reader sees what is compared.
std::string defence_setup(const GridResult& result) {
  const Grid& grid = result.grid;
  std::string text =
      "Per defence (bytes: message payload per node and round, without envelope and TLS; up = node to server, "
      "down = server to each node):\n\n";
  const std::vector<std::string> head = {"defence",
                                         "path",
                                         "code",
                                         "rule",
                                         "codec",
                                         "update rule",
                                         "learning rate",
                                         "lr from",
                                         "momentum at the nodes",
                                         "momentum in the update",
                                         "bytes up",
                                         "bytes down"};
  text += table_row(head) + table_rule(head.size());
  for (std::size_t d = 0; d < grid.defences.size(); ++d) {
    const Defence& defence = grid.defences[d];
    const DefenceSetup setup = setup_of(result, d);
    if (setup.options == nullptr) continue;
    const auto& o = *setup.options;
    const bool vote = o.rule == "vote";
    const std::string& update = o.update;
    std::vector<std::string> row = {
        md(defence.name), vote ? "sign vote" : "gradient", vote ? "`" + md(o.code) + "`" : "–", "`" + md(o.rule) + "`",
        vote ? "1-bit signs" : "`" + md(o.codec) + "`", "`" + md(update) + "`", "`" + md(o.lr) + "`",
        lr_origin(result, d),
        // The worker momentum feeds the signs; the gradient path sends raw gradients.
        vote && o.worker_momentum > 0.0 ? fixed(o.worker_momentum, 2) + " (per partition)" : "none",
        server_momentum(update),
        setup.measured ? (setup.measured->upload_exact ? "" : "≤ ") + bytes_text(setup.measured->upload_bytes) : "-",
        setup.measured ? bytes_text(setup.download_bytes) : "-"};
    text += table_row(row);
  }
  return text + "\n";
}

std::string tuning_section(const GridResult& result) {
  if (result.tuning.empty()) return "";
  const Grid& grid = result.grid;
  const LrSweep& first = result.tuning.front();
  std::string text = "### Learning-rate sweep\n\nBefore the grid, each defence trained its attack-free cell (" +
                     setting_label(first.setting) + ", seed " + std::to_string(first.seed) + ", " +
                     std::to_string(first.rounds) +
                     " rounds) at multiples of its untuned rate, on the training set "
                     "without its last " +
                     std::to_string(first.holdout) +
                     " examples; those held-out examples scored it (the test set was not used to choose). "
                     "Held-out accuracy (%), the chosen rate in bold:\n\n";
  std::vector<std::string> head = {"defence", "untuned lr"};
  for (const auto& c : first.candidates) {
    char factor[32];
    std::snprintf(factor, sizeof(factor), "×%g", c.factor);
    head.push_back(factor);
  }
  head.push_back("chosen lr");
  text += table_row(head) + table_rule(head.size());
  std::string edges;
  for (const auto& sweep : result.tuning) {
    std::vector<std::string> row = {md(grid.defences[sweep.defence].name), "`" + md(sweep.untuned) + "`"};
    for (std::size_t k = 0; k < sweep.candidates.size(); ++k) {
      const auto& c = sweep.candidates[k];
      std::string cell = c.done ? fixed(100.0 * c.accuracy, 1) : candidate_status(c);
      if (sweep.chosen && *sweep.chosen == k) cell = "**" + cell + "**";
      row.push_back(cell);
    }
    row.push_back(sweep.chosen ? "`" + md(grid.defences[sweep.defence].lr.value_or(sweep.untuned)) + "`"
                               : "none finished");
    text += table_row(row);
    if (sweep.at_edge) edges += (edges.empty() ? "" : ", ") + md(grid.defences[sweep.defence].name);
  }
  if (!edges.empty()) {
    text += "\nThe best rate was at the edge of the sweep for " + edges +
            ": a better one may lie outside it (widen --tune-lr-factors).\n";
  }
  return text + "\n";
}

// Whether every defence trained about as well as the best without an attack: otherwise a gap
// under attack may be a gap in training, and the report says so and why.
std::string fairness_section(const GridResult& result, std::span<const Aggregate> aggregates) {
  const Grid& grid = result.grid;
  if (!grid.baseline) return "";
  constexpr double kTolerance = 0.02;
  std::string text =
      "### Attack-free accuracy\n\nA comparison under attack is fair when every defence trains about "
      "as well without one. Final test accuracy (%) without attack, and the gap to the best defence "
      "of the setting (points):\n\n";
  std::vector<std::string> head = {"defence"};
  for (const auto& s : grid.settings) head.push_back(setting_label(s));
  text += table_row(head) + table_rule(head.size());
  std::map<std::size_t, std::vector<std::string>> behind;  // defence → settings where it is > 2 points behind
  std::map<std::size_t, double> largest_gap;
  for (std::size_t d = 0; d < grid.defences.size(); ++d) {
    std::vector<std::string> row = {md(grid.defences[d].name)};
    for (const auto& s : grid.settings) {
      double best = -1.0;
      for (std::size_t e = 0; e < grid.defences.size(); ++e) {
        const Aggregate* a = find(aggregates, s, e, "none");
        if (a && a->done > 0) best = std::max(best, a->accuracy.mean);
      }
      const Aggregate* a = find(aggregates, s, d, "none");
      if (a == nullptr || a->done == 0) {
        row.push_back(a == nullptr ? "-" : missing(*a));
        continue;
      }
      const double gap = best - a->accuracy.mean;
      // Only the best itself is "best": a gap below the table's precision shows as −0.0.
      row.push_back(fixed(100.0 * a->accuracy.mean, 1) + " (" + (gap > 0.0 ? "−" + fixed(100.0 * gap, 1) : "best") +
                    ")");
      if (gap > kTolerance) {
        behind[d].push_back(setting_label(s));
        largest_gap[d] = std::max(largest_gap[d], gap);
      }
    }
    text += table_row(row);
  }
  if (behind.empty())
    return text + "\nEvery defence is within 2 points of the best one without attack in every setting.\n\n";
  text +=
      "\n**More than 2 points behind the best defence without any attack** — their results under attack carry "
      "this gap too:\n\n";
  for (const auto& [d, settings] : behind) {
    std::string why;
    const LrSweep* sweep = nullptr;
    for (const auto& t : result.tuning) {
      if (t.defence == d) sweep = &t;
    }
    const auto& o = *setup_of(result, d).options;
    if (sweep != nullptr && !sweep->chosen) {
      why = "its learning rate could not be tuned (none of its sweep runs finished at n = " +
            std::to_string(sweep->setting.nodes) + ", b = " + std::to_string(sweep->setting.byzantine) +
            ", the sweep's setting), so it kept `" + md(o.lr) + "` while tuned defences got their best rate";
    } else if (sweep != nullptr && sweep->at_edge) {
      why =
          "its learning rate was tuned, but the best was at the edge of the sweep: a better one may lie outside "
          "it (widen --tune-lr-factors)";
    } else if (sweep != nullptr) {
      why = "its learning rate was tuned (`" + md(o.lr) +
            "`): at its best rate within the sweep, its rule and "
            "update (`" +
            md(o.update) + "`) train slower than the best defence's in " + std::to_string(o.rounds) +
            " rounds — a gap of the method at this budget, not of the learning rate";
    } else {
      const std::string source = defence_lr_source(grid, grid.defences[d]);
      why = "its learning rate `" + md(o.lr) + "` is " +
            (source == "default" ? "the default of its update rule `" + md(o.update) + "`"
             : source == "base"  ? "the one given for every defence"
                                 : "the defence's own") +
            ", not tuned for this grid: rerun with --tune-lr";
    }
    std::string where;
    for (const auto& s : settings) where += (where.empty() ? "" : "; ") + s;
    text += "- **" + md(grid.defences[d].name) + "** (up to " + fixed(100.0 * largest_gap[d], 1) + " points behind; " +
            where + "): " + why + ".\n";
  }
  return text + "\n";
}

}  // namespace

std::string markdown_report(const GridResult& result, std::span<const Aggregate> aggregates,
                            std::span<const Figure> figures, const ReportOptions& options) {
  const Grid& grid = result.grid;
  const auto attacks = columns(grid);
  std::string md_text = "# " + options.title + "\n\n";
  if (!options.preamble.empty()) md_text += options.preamble + "\n\n";
  if (!options.command.empty()) md_text += "Made with:\n\n```sh\n" + options.command + "\n```\n\n";

  std::size_t done = 0, not_applicable = 0, failed = 0, cancelled = 0, repeated = 0;
  for (const auto& cell : result.cells) {
    if (cell.same_as) {
      ++repeated;
      continue;
    }
    switch (result.results[cell.index].status) {
      case CellStatus::kDone:
        ++done;
        break;
      case CellStatus::kNotApplicable:
        ++not_applicable;
        break;
      case CellStatus::kFailed:
        ++failed;
        break;
      case CellStatus::kCancelled:
        ++cancelled;
        break;
    }
  }
  const auto& b = grid.base;
  md_text += "## Setup\n\n";
  md_text += "- data `" + b.data + "`, model `" + b.model + "`, " + std::to_string(b.rounds) +
             " rounds, partition size " + std::to_string(b.partition_size) + " (global batch n × " +
             std::to_string(b.partition_size) + ")\n";
  md_text += std::string("- learning rates: ") +
             (!result.tuning.empty() ? "tuned per defence (below)"
              : grid.lr_per_update
                  ? "each update rule's default schedule (learning/optimizer.h), unless a defence sets its own"
                  : "`" + b.lr + "` for every defence that sets none") +
             "; what differs between defences is in the table below\n";
  md_text += "- test accuracy every " + std::to_string(b.eval_every) + " rounds on the first " +
             std::to_string(b.eval_examples) +
             " test examples (all of a smaller test set); the final accuracy is on the whole test set\n";
  std::string attack_list;
  for (const auto& a : grid.attacks) attack_list += (attack_list.empty() ? "`" : ", `") + a + "`";
  md_text += "- attacks: " + (attack_list.empty() ? std::string("none") : attack_list) +
             (grid.baseline ? " and the attack-free baseline" : "") + "; the b Byzantine nodes are chosen `" +
             grid.attacker_choice + "`\n";
  std::string seed_list;
  for (auto s : grid.seeds) seed_list += (seed_list.empty() ? "" : ", ") + std::to_string(s);
  md_text += "- seeds: " + seed_list + " (mean ± sample sd over seeds when more than one)\n";
  md_text += "- " + std::to_string(result.cells.size()) + " cells: " + std::to_string(done) + " run, " +
             std::to_string(repeated) + " baselines shared with an identical run, " + std::to_string(not_applicable) +
             " not applicable, " + std::to_string(failed) + " failed, " + std::to_string(cancelled) + " cancelled; " +
             fixed(result.seconds, 1) + " s on " + std::to_string(result.jobs) + " threads" +
             (result.cancelled ? " (**cancelled**: the tables show what finished)" : "") + "\n\n";
  md_text += defence_setup(result);
  md_text += tuning_section(result);
  md_text += fairness_section(result, aggregates);

  const std::string target = fixed(100.0 * grid.target_accuracy, 0) + "%";
  for (const auto& setting : grid.settings) {
    md_text += "## " + setting_label(setting) + "\n\n";
    // Final accuracy with the worst case.
    md_text += "Final test accuracy (%):\n\n";
    std::vector<std::string> head = {"defence", "r"};
    for (const auto& a : attacks) head.push_back(md(attack_label(a)));
    if (!grid.attacks.empty()) head.push_back("worst case");
    md_text += table_row(head) + table_rule(head.size());
    for (std::size_t d = 0; d < grid.defences.size(); ++d) {
      std::vector<std::string> row = {md(grid.defences[d].name), "-"};
      for (const auto& attack : attacks) {
        const Aggregate* a = find(aggregates, setting, d, attack);
        if (a && a->done > 0 && row[1] == "-" && grid.defences[d].rule == "vote") row[1] = fixed(a->redundancy.mean, 2);
        row.push_back(a == nullptr  ? "-"
                      : a->done > 0 ? percent_stats(a->accuracy) + (a->done < a->seeds ? "*" : "")
                                    : missing(*a));
      }
      if (!grid.attacks.empty()) row.push_back(worst_text(aggregates, setting, d, /*full=*/true));
      md_text += table_row(row);
    }
    md_text += "\nRounds to " + target +
               " test accuracy (first evaluation at or above it; mean over the seeds that reached it):\n\n";
    head = {"defence"};
    for (const auto& a : attacks) head.push_back(md(attack_label(a)));
    md_text += table_row(head) + table_rule(head.size());
    for (std::size_t d = 0; d < grid.defences.size(); ++d) {
      std::vector<std::string> row = {md(grid.defences[d].name)};
      for (const auto& attack : attacks) {
        const Aggregate* a = find(aggregates, setting, d, attack);
        if (a == nullptr) {
          row.push_back("-");
        } else if (a->done == 0) {
          row.push_back(missing(*a));
        } else if (a->reached == 0) {
          row.push_back("never");
        } else {
          std::string text = fixed(a->rounds_to_target.mean, 0);
          if (a->reached < a->done || a->done > 1)
            text += " (" + std::to_string(a->reached) + "/" + std::to_string(a->done) + ")";
          row.push_back(text);
        }
      }
      md_text += table_row(row);
    }
    if (!grid.attacks.empty()) {
      md_text += "\nRounds whose final vote differed from the attack-free vote (%):\n\n";
      head = {"defence"};
      for (const auto& a : grid.attacks) head.push_back(md(a));
      md_text += table_row(head) + table_rule(head.size());
      for (std::size_t d = 0; d < grid.defences.size(); ++d) {
        std::vector<std::string> row = {md(grid.defences[d].name)};
        for (const auto& attack : grid.attacks) {
          const Aggregate* a = find(aggregates, setting, d, attack);
          row.push_back(a == nullptr       ? "-"
                        : a->done == 0     ? missing(*a)
                        : a->compared == 0 ? "n/a"
                                           : percent_stats(a->changed_fraction));
        }
        md_text += table_row(row);
      }
      md_text += "\nCoordinates of the final vote the attack changed, mean per round (% of the d parameters):\n\n";
      md_text += table_row(head) + table_rule(head.size());
      for (std::size_t d = 0; d < grid.defences.size(); ++d) {
        std::vector<std::string> row = {md(grid.defences[d].name)};
        for (const auto& attack : grid.attacks) {
          const Aggregate* a = find(aggregates, setting, d, attack);
          row.push_back(a == nullptr       ? "-"
                        : a->done == 0     ? missing(*a)
                        : a->compared == 0 ? "n/a"
                                           : percent_stats(a->changed_coordinates, 3));
        }
        md_text += table_row(row);
      }
    }
    md_text += defences_table(grid, aggregates, setting);
    for (const auto& figure : figures) {
      if (figure.file == "figures/accuracy_" + setting_file(setting) + ".svg") {
        md_text += "\n![" + figure.caption + "](" + figure.file + ")\n";
      }
    }
    md_text += "\n";
  }

  if (!grid.attacks.empty()) {
    md_text +=
        "## Worst case over attacks\n\nLowest final test accuracy (%) over the attacks, per defence and setting:\n\n";
    std::vector<std::string> head = {"defence"};
    for (const auto& s : grid.settings)
      head.push_back("n=" + std::to_string(s.nodes) + ", b=" + std::to_string(s.byzantine));
    md_text += table_row(head) + table_rule(head.size());
    bool partial = false;
    for (std::size_t d = 0; d < grid.defences.size(); ++d) {
      std::vector<std::string> row = {md(grid.defences[d].name)};
      for (const auto& s : grid.settings) {
        row.push_back(worst_text(aggregates, s, d, /*full=*/false));
        if (const auto worst = worst_case(aggregates, s, d); worst && worst->partial()) partial = true;
      }
      md_text += table_row(row);
    }
    if (partial) {
      md_text +=
          "\n`†`: over fewer of the grid's attacks than it has — those that do not apply to the defence (sign "
          "attacks against a gradient-path rule, for example) or did not finish, named in the setting's table "
          "above. Such a worst case is not comparable with one over every attack; the figures below draw it as "
          "it is.\n";
    }
    for (const auto& figure : figures) {
      if (figure.file == "figures/worst_case.svg" || figure.file == "figures/worst_case_heatmap.svg" ||
          figure.file == "figures/accuracy_vs_b.svg") {
        md_text += "\n![" + figure.caption + "](" + figure.file + ")\n";
      }
    }
    md_text += "\n";
  }

  std::string notes;
  std::set<std::string> seen;
  for (const auto& a : aggregates) {
    if (a.done == a.seeds) continue;
    const std::string line = "- " + setting_label(a.setting) + ", " + md(grid.defences[a.defence].name) + ", " +
                             md(attack_label(a.attack)) + ": " + cell_status_name(a.first_status) + " — " + a.reason +
                             "\n";
    if (seen.insert(line).second) notes += line;
  }
  if (!notes.empty()) {
    md_text +=
        "## Cells that did not finish\n\n`*` marks a mean over fewer seeds than the grid has (a worst case with `*` is "
        "over some attack's fewer seeds, or lacks an attack that did not finish). Reasons:\n\n" +
        notes + "\n";
  }
  return md_text;
}

Status prepare_report_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir / "figures", ec);
  if (ec) return make_error(ErrorCode::kIo, "cannot create '" + (dir / "figures").string() + "': " + ec.message());
  const std::filesystem::path probe = dir / "figures" / ".ballot-write-probe";
  std::ofstream(probe, std::ios::binary | std::ios::trunc) << 'x';
  const bool written = std::filesystem::file_size(probe, ec) == 1 && !ec;
  std::filesystem::remove(probe, ec);
  if (!written) return make_error(ErrorCode::kIo, "cannot write in '" + (dir / "figures").string() + "'");
  // The report's own files: a directory in their place, or a file that cannot be written, would
  // only fail after the grid ran (appending nothing leaves an old report as it is).
  for (const char* name : {"results.json", "report.md"}) {
    const auto path = dir / name;
    if (std::filesystem::is_directory(path, ec))
      return make_error(ErrorCode::kIo, "cannot write '" + path.string() + "': it is a directory");
    if (std::filesystem::exists(path, ec) && !std::ofstream(path, std::ios::binary | std::ios::app))
      return make_error(ErrorCode::kIo, "cannot write '" + path.string() + "'");
  }
  const std::filesystem::path top = dir / ".ballot-write-probe";
  std::ofstream(top, std::ios::binary | std::ios::trunc) << 'x';
  const bool top_written = std::filesystem::file_size(top, ec) == 1 && !ec;
  std::filesystem::remove(top, ec);
  if (!top_written) return make_error(ErrorCode::kIo, "cannot write in '" + dir.string() + "'");
  return {};
}

Status write_report(const GridResult& result, const std::filesystem::path& dir, const ReportOptions& options) {
  BALLOT_TRY(prepare_report_dir(dir));
  const auto aggregates = aggregate(result);
  const auto figures = make_figures(result, aggregates);
  const auto write = [](const std::filesystem::path& path, const std::string& text) -> Status {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) return make_error(ErrorCode::kIo, "cannot write '" + path.string() + "'");
    return {};
  };
  BALLOT_TRY(write(dir / "results.json", results_json(result)));
  for (const auto& figure : figures) BALLOT_TRY(write(dir / figure.file, figure.svg));
  BALLOT_TRY(write(dir / "report.md", markdown_report(result, aggregates, figures, options)));
  return {};
}

}  // namespace ballot::evaluation

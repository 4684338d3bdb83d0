#include "coding/code_report.h"

#include <chrono>
#include <cstdarg>
#include <cstdio>

#include "coding/allocation_analysis.h"
#include "coding/code_search.h"
#include "coding/tolerance.h"

namespace ballot::coding {
namespace {

void append(std::string& out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void append(std::string& out, const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  out += buffer;
}

void append_matrix(std::string& out, const AllocationMatrix& g) {
  for (std::size_t i = 0; i < g.n(); ++i) {
    append(out, "  node %2zu |", i);
    for (std::size_t j = 0; j < g.n(); ++j) out += g.get(i, j) ? " 1" : " .";
    append(out, " | %zu\n", g.row_size(i));
  }
}

void append_tolerance(std::string& out, const AllocationMatrix& g, ThreatModel model, const char* label) {
  const auto profile = max_tolerated_b(g, model);
  if (!profile.ok()) {
    append(out, "  %-44s not certified (%s)\n", label, profile.error().message.c_str());
    return;
  }
  if (profile->max_b < 0)
    append(out, "  %-44s none (wrong even without attack: a final tie counts as wrong)\n", label);
  else
    append(out, "  %-44s b = %d\n", label, profile->max_b);
  if (profile->breaking)
    append(out, "    smallest breaking coalition: %s\n", profile->breaking->to_string(g.n()).c_str());
}

}  // namespace

Result<std::string> code_report(const AllocationMatrix& g, const CodeReportOptions& options) {
  const std::size_t n = g.n();
  std::string out;
  const auto analysis = analyze(g);
  append(out, "election code: n = %zu, ones = %zu, r = %.3f\n", n, g.ones(), g.redundancy());
  append(out, "structure: %s\n", analysis.summary().c_str());
  if (options.show_matrix && n <= 64) {
    out += "matrix (rows = voting nodes, columns = partitions; last column = partitions per node):\n";
    append_matrix(out, g);
  }

  if (n >= 1 && n <= kMaxCertifiedNodes)
    append(out, "tolerance (exhaustive over all 2^%zu sign patterns):\n", n);
  else
    out += "tolerance (n beyond the exhaustive certificate):\n";
  append_tolerance(out, g, ThreatModel::kVotesOnly, "replicated; exchange, every input in (a):");
  append_tolerance(out, g, ThreatModel::kVotesAndSources, "exchange, Byzantine sources, validity (b):");
  const auto bound = structural_bound(g);
  append(out, "  %-44s b = %d (%zu full rows, %zu singleton/complement pairs)\n",
         "structural guarantee (any n):", bound.guaranteed_b, bound.full_rows, bound.pairs);
  out += "  note: under (b) plain majority (G = I) is already valid for every b < n/2.\n";

  std::vector<std::size_t> counts = options.byzantine_counts;
  if (counts.empty())
    for (std::size_t b = 0; 2 * b + 1 <= n; ++b) counts.push_back(b);
  append(out,
         "Monte Carlo error probability (q = %.3f, attack %s, %s, random Byzantine set, %llu "
         "trials per cell, seed %llu):\n",
         options.q, election_attack_name(options.attack), tie_rule_name(options.ties),
         static_cast<unsigned long long>(options.trials), static_cast<unsigned long long>(options.seed));
  out += "     b   this code            majority vote (G = I)\n";
  const auto identity = AllocationMatrix::identity(n);
  for (const std::size_t b : counts) {
    MonteCarloOptions mc;
    mc.b = b;
    mc.q = options.q;
    mc.attack = options.attack;
    mc.ties = options.ties;
    mc.trials = options.trials;
    mc.seed = options.seed;
    BALLOT_ASSIGN_OR_RETURN(const auto coded, estimate_error(g, mc));
    BALLOT_ASSIGN_OR_RETURN(const auto plain, estimate_error(identity, mc));
    append(out, "  %4zu   %.4f ± %.4f      %.4f ± %.4f\n", b, coded.error, coded.standard_error, plain.error,
           plain.standard_error);
  }
  return out;
}

Result<std::string> code_report(std::string_view spec, std::size_t n, const CodeReportOptions& options) {
  BALLOT_ASSIGN_OR_RETURN(const Spec parsed, Spec::parse(spec));
  BALLOT_ASSIGN_OR_RETURN(const AllocationMatrix g, make_allocation_matrix(parsed, n, options.seed));
  BALLOT_ASSIGN_OR_RETURN(std::string body, code_report(g, options));
  return "code " + parsed.to_string() + "\n" + body;
}

Result<std::string> code_search_report(std::size_t n, std::size_t b) {
  const auto start = std::chrono::steady_clock::now();
  BALLOT_ASSIGN_OR_RETURN(const auto result, find_minimum_redundancy_code(n, b));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string out;
  append(out, "minimum-redundancy code for n = %zu, b = %zu: %zu ones, r = %.3f (%s)\n", n, b, result.ones,
         static_cast<double>(result.ones) / static_cast<double>(n),
         result.proven_optimal ? "proven optimal" : "best found, search stopped");
  if (result.construction_ones != 0)
    append(out, "general construction: %zu ones, r = %.3f\n", result.construction_ones,
           static_cast<double>(result.construction_ones) / static_cast<double>(n));
  append(out, "search: %llu nodes visited in %.3f s\n", static_cast<unsigned long long>(result.visits), seconds);
  append_matrix(out, result.matrix);
  return out;
}

}  // namespace ballot::coding

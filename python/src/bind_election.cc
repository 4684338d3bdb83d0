// ballot._native bindings of the election codes (coding/): allocation matrices by spec, the
// tolerance certificates with their counter-examples, the minimum-redundancy search and the
// Monte Carlo error estimates.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "coding/allocation_matrix.h"
#include "coding/code_search.h"
#include "coding/election_monte_carlo.h"
#include "coding/tolerance.h"
#include "core/spec.h"
#include "python/src/native.h"

namespace ballot::python {
namespace {

using coding::AllocationMatrix;

coding::ThreatModel threat_model(const std::string& name) {
  if (name == "votes_only" || name == "a") return coding::ThreatModel::kVotesOnly;
  if (name == "votes_and_sources" || name == "b") return coding::ThreatModel::kVotesAndSources;
  throw nb::value_error(("model: unknown threat model '" + name + "' (votes_only or votes_and_sources)").c_str());
}

nb::object counter_example(const std::optional<coding::CounterExample>& example, std::size_t n) {
  if (!example) return nb::none();
  nb::dict out;
  std::vector<int> signs(n);
  for (std::size_t j = 0; j < n; ++j) signs[j] = (example->pattern >> j) & 1u ? 1 : -1;
  out["partition_signs"] = nb::cast(signs);
  out["target"] = example->target;
  out["byzantine"] = nb::cast(example->byzantine);
  out["correct_votes"] = example->correct_votes;
  out["text"] = example->to_string(n);
  return out;
}

AllocationMatrix code_from_spec(const std::string& spec, std::size_t n, std::uint64_t seed) {
  return unwrap(coding::make_allocation_matrix(unwrap(Spec::parse(spec)), n, seed));
}

AllocationMatrix code_from_rows(std::size_t n, const std::vector<std::vector<std::uint32_t>>& rows) {
  return unwrap(AllocationMatrix::from_rows(n, rows));
}

std::vector<std::vector<std::uint32_t>> rows_of(const AllocationMatrix& g) {
  std::vector<std::vector<std::uint32_t>> rows;
  for (std::size_t i = 0; i < g.n(); ++i) rows.push_back(g.row(i));
  return rows;
}

nb::dict certify(const AllocationMatrix& g, std::size_t b, const std::string& model) {
  const coding::ThreatModel m = threat_model(model);
  Result<coding::Certificate> result = make_error(ErrorCode::kInternal, "not run");
  {
    nb::gil_scoped_release released;
    result = coding::certify(g, b, m);
  }
  const coding::Certificate c = unwrap(std::move(result));
  nb::dict out;
  out["model"] = coding::threat_model_name(c.model);
  out["n"] = c.n;
  out["b"] = c.b;
  out["tolerant"] = c.tolerant;
  out["counter_example"] = counter_example(c.counter_example, c.n);
  out["patterns_checked"] = c.patterns_checked;
  return out;
}

nb::dict max_tolerated(const AllocationMatrix& g, const std::string& model) {
  const coding::ThreatModel m = threat_model(model);
  Result<coding::ToleranceProfile> result = make_error(ErrorCode::kInternal, "not run");
  {
    nb::gil_scoped_release released;
    result = coding::max_tolerated_b(g, m);
  }
  const coding::ToleranceProfile p = unwrap(std::move(result));
  nb::dict out;
  out["model"] = coding::threat_model_name(p.model);
  out["max_b"] = p.max_b;
  out["breaking"] = counter_example(p.breaking, p.n);
  out["min_correct_votes"] = p.min_correct_votes;
  return out;
}

nb::dict structural(const AllocationMatrix& g) {
  const coding::StructuralBound s = coding::structural_bound(g);
  nb::dict out;
  out["full_rows"] = s.full_rows;
  out["pairs"] = s.pairs;
  out["guaranteed_b"] = s.guaranteed_b;
  return out;
}

nb::dict search(std::size_t n, std::size_t b, std::uint64_t max_visits) {
  Result<coding::CodeSearchResult> result = make_error(ErrorCode::kInternal, "not run");
  {
    nb::gil_scoped_release released;
    result = coding::find_minimum_redundancy_code(n, b, coding::CodeSearchOptions{max_visits});
  }
  coding::CodeSearchResult r = unwrap(std::move(result));
  nb::dict out;
  out["rows"] = nb::cast(rows_of(r.matrix));
  out["ones"] = r.ones;
  out["proven_optimal"] = r.proven_optimal;
  out["visits"] = r.visits;
  out["construction_ones"] = r.construction_ones;
  return out;
}

coding::MonteCarloOptions monte_carlo_options(std::size_t b, double q, const std::string& attack,
                                              const std::string& ties, std::uint64_t trials, std::uint64_t seed) {
  coding::MonteCarloOptions o;
  o.b = b;
  o.q = q;
  o.attack = unwrap(coding::parse_election_attack(attack));
  if (ties == "plus_one") {
    o.ties = coding::TieRule::kPlusOne;
  } else if (ties == "abstain") {
    o.ties = coding::TieRule::kAbstain;
  } else {
    throw nb::value_error(("ties: unknown tie rule '" + ties + "' (plus_one or abstain)").c_str());
  }
  o.trials = trials;
  o.seed = seed;
  return o;
}

nb::dict estimate_dict(const coding::MonteCarloEstimate& e) {
  nb::dict out;
  out["trials"] = e.trials;
  out["errors"] = e.errors;
  out["error"] = e.error;
  out["standard_error"] = e.standard_error;
  out["mean_redundancy"] = e.mean_redundancy;
  return out;
}

nb::dict monte_carlo_fixed(const AllocationMatrix& g, std::size_t b, double q, const std::string& attack,
                           const std::string& ties, std::uint64_t trials, std::uint64_t seed) {
  const auto options = monte_carlo_options(b, q, attack, ties, trials, seed);
  Result<coding::MonteCarloEstimate> result = make_error(ErrorCode::kInternal, "not run");
  {
    nb::gil_scoped_release released;
    result = coding::estimate_error(g, options);
  }
  return estimate_dict(unwrap(std::move(result)));
}

nb::dict monte_carlo_bernoulli(std::size_t n, double r, std::size_t b, double q, const std::string& attack,
                               const std::string& ties, std::uint64_t trials, std::uint64_t seed) {
  const auto options = monte_carlo_options(b, q, attack, ties, trials, seed);
  Result<coding::MonteCarloEstimate> result = make_error(ErrorCode::kInternal, "not run");
  {
    nb::gil_scoped_release released;
    result = coding::estimate_error_bernoulli(n, r, options);
  }
  return estimate_dict(unwrap(std::move(result)));
}

}  // namespace

void register_election(nb::module_& m) {
  nb::class_<AllocationMatrix>(m, "AllocationMatrix")
      .def_static("from_spec", &code_from_spec, nb::arg("spec"), nb::arg("n"), nb::arg("seed"))
      .def_static("from_rows", &code_from_rows, nb::arg("n"), nb::arg("rows"))
      .def_static(
          "parse", [](const std::string& text) { return unwrap(AllocationMatrix::parse(text)); }, nb::arg("text"))
      .def_prop_ro("n", &AllocationMatrix::n)
      .def_prop_ro("ones", &AllocationMatrix::ones)
      .def_prop_ro("redundancy", &AllocationMatrix::redundancy)
      .def("rows", &rows_of)
      .def("to_text", &AllocationMatrix::to_text)
      .def("__eq__", [](const AllocationMatrix& a, const AllocationMatrix& b) { return a == b; });
  m.def("certify", &certify, nb::arg("code"), nb::arg("b"), nb::arg("model"));
  m.def("max_tolerated_b", &max_tolerated, nb::arg("code"), nb::arg("model"));
  m.def("structural_bound", &structural, nb::arg("code"));
  m.def("find_minimum_redundancy_code", &search, nb::arg("n"), nb::arg("b"), nb::arg("max_visits"));
  m.def("monte_carlo", &monte_carlo_fixed, nb::arg("code"), nb::arg("b"), nb::arg("q"), nb::arg("attack"),
        nb::arg("ties"), nb::arg("trials"), nb::arg("seed"));
  m.def("monte_carlo_bernoulli", &monte_carlo_bernoulli, nb::arg("n"), nb::arg("r"), nb::arg("b"), nb::arg("q"),
        nb::arg("attack"), nb::arg("ties"), nb::arg("trials"), nb::arg("seed"));
  m.attr("max_certified_nodes") = coding::kMaxCertifiedNodes;
  m.attr("max_search_nodes") = coding::kMaxSearchNodes;
}

}  // namespace ballot::python

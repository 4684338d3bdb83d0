// ballot._native bindings of attacks/: the gradient attacks crafted from the honest vectors of a
// round (omniscient view), as in the runtime and the evaluation engine.
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "attacks/attack_spec.h"
#include "attacks/gradient_attacks.h"
#include "python/src/native.h"

namespace ballot::python {
namespace {

nb::ndarray<nb::numpy, float, nb::ndim<1>> craft(const std::string& spec, nb::handle honest, nb::handle own,
                                                 std::size_t n, std::size_t m, std::uint64_t seed,
                                                 std::uint64_t stream) {
  const attacks::Behaviour behaviour = unwrap(attacks::Behaviour::parse(spec));
  if (behaviour.kind != attacks::AttackKind::kNone && behaviour.domain() != attacks::Domain::kGradient)
    throw nb::value_error(("attack: '" + spec +
                           "' is not a gradient attack (gradient attacks: sign_flip, scaled, "
                           "gaussian, zero, alie, ipm, mimic)")
                              .c_str());
  const FloatRows rows = float_rows(honest, "honest_vectors");
  if (rows.device != Device::kCpu) throw nb::value_error("honest_vectors: attacks run on the CPU; use .cpu()");
  HeldSpan<const float> own_values;
  if (!own.is_none()) {
    own_values = cpu_floats(own, "own");
    if (!rows.rows.empty() && own_values.size() != rows.d)
      throw nb::value_error("own: must have as many elements as each honest vector");
  }
  if (rows.rows.empty() && own_values.empty())
    throw nb::value_error("honest_vectors: at least one honest vector (or `own`) is needed");
  if (behaviour.kind == attacks::AttackKind::kMimic && rows.rows.empty())
    throw nb::value_error("mimic: needs at least one honest vector to copy");
  if (m == 0 || m >= n)
    throw nb::value_error(
        ("attackers: need 1 <= m < n (m = " + std::to_string(m) + ", n = " + std::to_string(n) + ")").c_str());
  std::vector<std::span<const float>> spans;
  for (const float* row : rows.rows) spans.emplace_back(row, rows.d);
  robust::InputMatrix matrix;
  if (!spans.empty()) matrix = unwrap(robust::InputMatrix::from_rows(spans));
  attacks::GradientContext context{matrix, own_values, n, m};
  Rng rng(seed, stream);
  std::vector<float> out;
  {
    nb::gil_scoped_release released;
    attacks::craft_gradient(behaviour, context, rng, out);
  }
  return to_numpy(std::move(out));
}

}  // namespace

void register_attacks(nb::module_& m) {
  m.def("craft_gradient", &craft, nb::arg("spec"), nb::arg("honest"), nb::arg("own").none(), nb::arg("n"), nb::arg("m"),
        nb::arg("seed"), nb::arg("stream"));
  m.def("alie_z", &attacks::alie_z, nb::arg("n"), nb::arg("m"));
  // The attack table (attacks/attack_spec.h): (name, domain, example, summary) per line.
  m.def("attack_table", [] {
    std::vector<std::tuple<std::string, std::string, std::string, std::string>> out;
    for (const attacks::AttackEntry& entry : attacks::attack_table())
      out.emplace_back(entry.name, attacks::domain_name(entry.properties.domain), entry.example, entry.summary);
    return out;
  });
}

}  // namespace ballot::python

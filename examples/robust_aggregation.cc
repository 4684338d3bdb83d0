// Example: robust aggregation under attack, with the library API alone (ballot::robust and
// ballot::attacks, no runtime). 20 workers hold noisy copies of one gradient; 5 of them are
// Byzantine. Two attacks from docs/attacks.md ("Gradient domain"):
//  - gaussian (σ = 200): huge random vectors. The plain mean is ruined; every robust rule stays
//    close to the honest mean.
//  - ALIE (Baruch et al. 2019): ḡ − z·s, a small shift inside the honest spread, built to slip
//    past median- and distance-based rules. The table shows how far each rule is pushed.
// Exit status 0 iff, under the gaussian attack, the mean lands farther than 2·√d from the honest
// mean and every robust rule nearer than that (one honest worker is about √d away from it).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "attacks/attack_spec.h"
#include "attacks/gradient_attacks.h"
#include "core/rng.h"
#include "robust/registry.h"

namespace {

constexpr std::size_t kWorkers = 20;
constexpr std::size_t kByzantine = 5;
constexpr std::size_t kDimensions = 10000;

double distance(const std::vector<float>& a, const std::vector<double>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(sum);
}

}  // namespace

int main() {
  using namespace ballot;
  Rng rng(7);
  std::vector<float> truth(kDimensions);
  for (auto& g : truth) g = static_cast<float>(rng.normal());

  // The honest workers' gradients: the truth plus noise, one row each.
  const std::size_t honest = kWorkers - kByzantine;
  std::vector<float> rows(kWorkers * kDimensions);
  for (std::size_t w = 0; w < honest; ++w) {
    for (std::size_t i = 0; i < kDimensions; ++i) {
      rows[w * kDimensions + i] = truth[i] + static_cast<float>(rng.normal());
    }
  }
  const robust::InputMatrix honest_rows(rows.data(), honest, kDimensions);
  std::vector<double> honest_mean;
  attacks::honest_moments(honest_rows, honest_mean, nullptr);

  const std::vector<std::string> rules = {
      "mean",      "median", "trimmed_mean:f=5", "krum:f=5", "nnm:f=5 > krum:f=5", "centered_clipping:f=5,tau=10",
      "bulyan:f=4"};
  // Twice one honest worker's distance: a rule within it is as close as an honest input would be,
  // and far below the σ·√d ≈ 20000 of one gaussian attacker or the mean's ≈ σ·√(d·m)/n ≈ 2236.
  const double close_bound = 2.0 * std::sqrt(static_cast<double>(kDimensions));
  bool gaussian_as_claimed = true;
  for (const char* attack_text : {"gaussian", "alie"}) {
    auto attack = attacks::Behaviour::parse(attack_text);
    if (!attack.ok()) return std::fprintf(stderr, "%s\n", attack.error().to_string().c_str()), 2;
    // Every Byzantine worker crafts its vector from the honest ones (an omniscient coalition).
    attacks::GradientContext context{honest_rows, {}, kWorkers, kByzantine};
    for (std::size_t w = honest; w < kWorkers; ++w) {
      std::vector<float> crafted;
      attacks::craft_gradient(*attack, context, rng, crafted);
      std::copy(crafted.begin(), crafted.end(), rows.begin() + static_cast<std::ptrdiff_t>(w * kDimensions));
    }
    std::printf("attack %-8s  distance of the aggregate to the honest mean (honest spread per worker: %.0f)\n",
                attack_text, std::sqrt(static_cast<double>(kDimensions)));
    for (const auto& spec : rules) {
      auto rule = robust::make_aggregator(spec);
      if (!rule.ok()) return std::fprintf(stderr, "%s\n", rule.error().to_string().c_str()), 2;
      auto result = (*rule)->aggregate(robust::InputMatrix(rows.data(), kWorkers, kDimensions));
      if (!result.ok()) return std::fprintf(stderr, "%s: %s\n", spec.c_str(), result.error().to_string().c_str()), 2;
      const double error = distance(result->value, honest_mean);
      std::string selected;
      for (auto i : result->report.selected) selected += (selected.empty() ? "" : ",") + std::to_string(i);
      std::printf("  %-30s %10.2f%s%s\n", spec.c_str(), error, selected.empty() ? "" : "   selected inputs ",
                  selected.c_str());
      if (std::string(attack_text) == "gaussian") {
        const bool ruined = !(error < close_bound);
        if (ruined != (spec == "mean")) {
          gaussian_as_claimed = false;
          std::printf("    expected %s %.0f\n", spec == "mean" ? "at least" : "below", close_bound);
        }
      }
    }
  }
  std::printf("inputs %zu..%zu are the Byzantine ones\n", honest, kWorkers - 1);
  return gaussian_as_claimed ? 0 : 1;
}

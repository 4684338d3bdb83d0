// Example: election coding (Sohn et al., NeurIPS 2020) with the library API alone (ballot::coding
// and ballot::attacks). n = 9 nodes, b = 2 of them Byzantine and omniscient: they see every
// partition's sign and choose the coalition and the votes that flip the most coordinates of the
// final majority. Plain signSGD with majority vote (G = I) loses coordinates; the deterministic
// code certified for b = 2 loses none, at the price of more computation per node (redundancy r).
// Exit status 0 iff the certificate holds and the certified code loses no coordinate.
#include <cstdio>
#include <string>
#include <vector>

#include "attacks/election_attack.h"
#include "attacks/targets.h"
#include "coding/allocation_matrix.h"
#include "coding/tolerance.h"
#include "core/rng.h"
#include "core/spec.h"
#include "kernels/sign_kernels.h"

int main() {
  using namespace ballot;
  constexpr std::size_t kNodes = 9;
  constexpr std::size_t kByzantine = 2;
  constexpr std::size_t kDimensions = 50000;

  // Partition signs of one round: each coordinate of each partition agrees with the true sign
  // with probability 0.7 (noisy mini-batch gradients).
  Rng rng(5);
  std::vector<float> truth(kDimensions);
  for (auto& t : truth) t = rng.bernoulli(0.5) ? 1.0f : -1.0f;
  std::vector<BitVector> partition_signs;
  for (std::size_t j = 0; j < kNodes; ++j) {
    std::vector<float> g(kDimensions);
    for (std::size_t i = 0; i < kDimensions; ++i) g[i] = rng.bernoulli(0.7) ? truth[i] : -truth[i];
    partition_signs.push_back(kernels::pack_signs(g));
  }

  bool ok = true;
  for (const char* code_text : {"identity", "deterministic:b=2"}) {
    auto spec = Spec::parse(code_text);
    if (!spec.ok()) return 2;
    auto g = coding::make_allocation_matrix(*spec, kNodes, /*seed=*/1);
    if (!g.ok()) return std::fprintf(stderr, "%s\n", g.error().to_string().c_str()), 2;
    auto certificate = coding::certify(*g, kByzantine, coding::ThreatModel::kVotesOnly);
    if (!certificate.ok()) return 2;
    // The adversary's best coalition for this G, then its best votes for this round.
    const auto coalition = attacks::worst_coalition(*g, kByzantine);
    const auto outcome = attacks::run_omniscient_election(*g, partition_signs, coalition);
    std::printf("%-18s r = %.2f  certified for b = %zu: %-3s  coalition {%zu,%zu} flips %zu of %zu coordinates\n",
                code_text, g->redundancy(), kByzantine, certificate->tolerant ? "yes" : "no", coalition[0],
                coalition[1], outcome.flipped, kDimensions);
    if (!certificate->tolerant) {
      std::printf("  counter-example: %s\n", certificate->counter_example->to_string(kNodes).c_str());
    }
    if (std::string(code_text) != "identity") ok = ok && certificate->tolerant && outcome.flipped == 0;
  }
  return ok ? 0 : 1;
}

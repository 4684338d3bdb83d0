// Example: signSGD with majority vote on one machine, with the library API alone.
// Five workers hold noisy estimates of the same gradient; each sends only the signs (1 bit per
// coordinate), the server takes the coordinate-wise majority, and the vote agrees with the true
// gradient's signs far more often than any single worker does.
#include "kernels/majority_vote.h"

#include <cstdio>
#include <vector>

#include "core/rng.h"
#include "kernels/sign_kernels.h"

int main() {
  constexpr std::size_t kDimensions = 100000;
  constexpr int kWorkers = 5;
  ballot::Rng rng(2024);

  std::vector<float> true_gradient(kDimensions);
  for (auto& g : true_gradient) g = static_cast<float>(rng.normal());
  const ballot::BitVector true_signs = ballot::kernels::pack_signs(true_gradient);

  std::vector<ballot::BitVector> worker_signs;
  std::size_t best_single = 0;
  for (int w = 0; w < kWorkers; ++w) {
    std::vector<float> noisy(kDimensions);
    for (std::size_t i = 0; i < kDimensions; ++i) {
      noisy[i] = true_gradient[i] + 1.5f * static_cast<float>(rng.normal());
    }
    worker_signs.push_back(ballot::kernels::pack_signs(noisy));
    const std::size_t agree = ballot::kernels::agreement_count(worker_signs.back(), true_signs);
    if (agree > best_single) best_single = agree;
  }

  ballot::BitVector vote;
  ballot::kernels::majority_vote(worker_signs, vote);
  const std::size_t vote_agree = ballot::kernels::agreement_count(vote, true_signs);
  std::printf("best single worker agrees on %.1f%% of signs, the majority vote on %.1f%%\n",
              100.0 * best_single / kDimensions, 100.0 * vote_agree / kDimensions);
  std::printf("bytes sent per worker: %zu (fp32 would be %zu)\n", vote.num_words() * 8, kDimensions * sizeof(float));
  return vote_agree > best_single ? 0 : 1;
}

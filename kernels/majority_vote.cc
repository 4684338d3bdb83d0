#include "kernels/majority_vote.h"

#include <vector>

#include "core/enforce.h"
#include "kernels/detail/cpu_kernels.h"
#include "kernels/sign_logic.h"

namespace ballot::kernels {
namespace {

void vote(std::span<const BitVector* const> inputs, const std::uint32_t* weights, std::uint64_t total_weight,
          BitVector& out) {
  if (inputs.empty() || total_weight == 0) {
    out.fill(true);  // an empty vote gives +1 everywhere, like a tie
    return;
  }
  const std::size_t size = inputs.front()->size();
  std::vector<const std::uint64_t*> words(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    BALLOT_ENFORCE_EQ(inputs[i]->size(), size);
    words[i] = inputs[i]->data();
  }
  if (out.size() != size) out = BitVector(size);
  detail::active_kernels().vote(words.data(), weights, inputs.size(), 0, out.num_words(), vote_threshold(total_weight),
                                planes_for(total_weight), out.data());
  // Padding bits of the inputs are zero, so the padding of the vote is zero unless the threshold
  // is zero; clear it regardless.
  out.clear_padding();
}

}  // namespace

void majority_vote(std::span<const BitVector* const> inputs, BitVector& out) {
  vote(inputs, nullptr, inputs.size(), out);
}

void majority_vote(std::span<const BitVector> inputs, BitVector& out) {
  std::vector<const BitVector*> pointers(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) pointers[i] = &inputs[i];
  majority_vote(pointers, out);
}

void weighted_majority_vote(std::span<const BitVector* const> inputs, std::span<const std::uint32_t> weights,
                            BitVector& out) {
  BALLOT_ENFORCE_EQ(inputs.size(), weights.size());
  std::uint64_t total = 0;
  for (auto weight : weights) total += weight;
  BALLOT_ENFORCE_LT(total, std::uint64_t{1} << 32);
  vote(inputs, weights.data(), total, out);
}

}  // namespace ballot::kernels

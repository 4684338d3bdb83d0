#include "attacks/election_attack.h"

#include <bit>

#include "coding/election_encoder.h"
#include "core/enforce.h"
#include "kernels/majority_vote.h"

namespace ballot::attacks {
namespace {

struct Election {
  std::vector<BitVector> votes;  // every node's honest vote c_i
  BitVector target;              // μ
  BitVector honest_vote;         // decode(votes)
  BitVector attacked_vote;       // decode with the coalition voting −μ
  std::vector<BitVector> messages;
};

Election attack(const coding::AllocationMatrix& g, std::span<const BitVector> partition_signs,
                std::span<const std::size_t> coalition) {
  const std::size_t n = g.n();
  BALLOT_ENFORCE_EQ(partition_signs.size(), n);
  std::vector<bool> member(n, false);
  for (const std::size_t i : coalition) {
    BALLOT_ENFORCE_LT(i, n);
    BALLOT_ENFORCE(!member[i], "coalition lists node " + std::to_string(i) + " twice");
    member[i] = true;
  }
  Election e;
  coding::elect_replicated(g, partition_signs, e.votes, e.honest_vote);
  kernels::majority_vote(partition_signs, e.target);
  BitVector against = e.target;
  against.flip();

  // The outcome when every member votes −μ: by monotonicity of the majority it is wrong exactly
  // where any message of this coalition can make it wrong (election_attack.h).
  std::vector<const BitVector*> attacked(n);
  for (std::size_t i = 0; i < n; ++i) attacked[i] = member[i] ? &against : &e.votes[i];
  kernels::majority_vote(std::span<const BitVector* const>(attacked), e.attacked_vote);

  // Members lie (−μ) only where it changes the outcome, and send their honest vote elsewhere.
  const std::size_t words = e.target.num_words();
  e.messages.reserve(coalition.size());
  for (const std::size_t i : coalition) {
    BitVector message = e.votes[i];
    for (std::size_t w = 0; w < words; ++w) {
      const std::uint64_t can = e.attacked_vote.words()[w] ^ e.target.words()[w];
      message.words()[w] = (can & against.words()[w]) | (~can & e.votes[i].words()[w]);
    }
    message.clear_padding();
    e.messages.push_back(std::move(message));
  }
  return e;
}

std::size_t differing(const BitVector& a, const BitVector& b) {
  std::size_t count = 0;
  for (std::size_t w = 0; w < a.num_words(); ++w)
    count += static_cast<std::size_t>(std::popcount(a.words()[w] ^ b.words()[w]));  // padding is zero in both
  return count;
}

}  // namespace

std::vector<BitVector> omniscient_votes(const coding::AllocationMatrix& g, std::span<const BitVector> partition_signs,
                                        std::span<const std::size_t> coalition) {
  return attack(g, partition_signs, coalition).messages;
}

ElectionOutcome run_omniscient_election(const coding::AllocationMatrix& g, std::span<const BitVector> partition_signs,
                                        std::span<const std::size_t> coalition) {
  Election e = attack(g, partition_signs, coalition);
  // Decode what the nodes actually send (members' messages), not the all −μ shortcut.
  for (std::size_t k = 0; k < coalition.size(); ++k) e.votes[coalition[k]] = e.messages[k];
  ElectionOutcome out;
  coding::decode(e.votes, out.attacked_vote);
  out.errors = differing(out.attacked_vote, e.target);
  out.flipped = differing(out.attacked_vote, e.honest_vote);
  out.target = std::move(e.target);
  out.honest_vote = std::move(e.honest_vote);
  return out;
}

}  // namespace ballot::attacks

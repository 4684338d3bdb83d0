#include "coding/election_encoder.h"

#include <algorithm>

#include "core/enforce.h"
#include "kernels/majority_vote.h"

namespace ballot::coding {

const char* input_rejection_name(InputRejection reason) noexcept {
  switch (reason) {
    case InputRejection::kNotInRow:
      return "not-in-row";
    case InputRejection::kWrongSize:
      return "wrong-size";
    case InputRejection::kEquivocation:
      return "equivocation";
    case InputRejection::kNull:
      return "null";
  }
  return "?";
}

void encode_replicated(const AllocationMatrix& g, std::size_t node, std::span<const BitVector> partition_signs,
                       BitVector& vote) {
  BALLOT_ENFORCE_LT(node, g.n());
  BALLOT_ENFORCE_EQ(partition_signs.size(), g.n());
  std::vector<const BitVector*> inputs;
  for (const std::uint32_t j : g.row(node)) inputs.push_back(&partition_signs[j]);
  if (inputs.empty()) {
    // Empty row: the empty majority (all +1) over the common size.
    vote = BitVector(partition_signs.empty() ? 0 : partition_signs.front().size(), true);
    return;
  }
  kernels::majority_vote(inputs, vote);
}

ExchangeVote encode_exchange(const AllocationMatrix& g, std::size_t node, std::size_t dimension,
                             std::span<const ExchangeInput> inputs) {
  BALLOT_ENFORCE_LT(node, g.n());
  const std::size_t n = g.n();
  ExchangeVote out;
  std::vector<const BitVector*> chosen(n, nullptr);
  std::vector<bool> equivocated(n, false);
  for (const ExchangeInput& input : inputs) {
    const std::uint32_t j = input.source;
    if (j >= n || !g.get(node, j)) {
      out.rejected.emplace_back(j, InputRejection::kNotInRow);
    } else if (input.signs == nullptr) {
      out.rejected.emplace_back(j, InputRejection::kNull);
    } else if (input.signs->size() != dimension) {
      out.rejected.emplace_back(j, InputRejection::kWrongSize);
    } else if (equivocated[j]) {
      out.rejected.emplace_back(j, InputRejection::kEquivocation);
    } else if (chosen[j] != nullptr && !(*chosen[j] == *input.signs)) {
      // Two different vectors signed by one source in one round: count neither (the transport
      // keeps both envelopes as proof).
      equivocated[j] = true;
      chosen[j] = nullptr;
      out.rejected.emplace_back(j, InputRejection::kEquivocation);
    } else {
      chosen[j] = input.signs;
    }
  }
  std::vector<const BitVector*> counted;
  for (const std::uint32_t j : g.row(node)) {
    if (chosen[j] != nullptr) {
      counted.push_back(chosen[j]);
      out.counted.push_back(j);
    } else {
      out.missing.push_back(j);
    }
  }
  if (counted.empty()) {
    out.vote = BitVector(dimension, true);  // the empty majority
  } else {
    kernels::majority_vote(counted, out.vote);
  }
  return out;
}

void decode(std::span<const BitVector> votes, BitVector& out) { kernels::majority_vote(votes, out); }

void elect_replicated(const AllocationMatrix& g, std::span<const BitVector> partition_signs,
                      std::vector<BitVector>& votes, BitVector& out) {
  votes.resize(g.n());
  for (std::size_t i = 0; i < g.n(); ++i) encode_replicated(g, i, partition_signs, votes[i]);
  if (votes.empty()) {
    out = BitVector(partition_signs.empty() ? 0 : partition_signs.front().size(), true);
    return;
  }
  decode(votes, out);
}

}  // namespace ballot::coding

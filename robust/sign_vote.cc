#include "robust/sign_vote.h"

#include <string>
#include <vector>

#include "kernels/majority_vote.h"

namespace ballot::robust {
namespace {

Status check_votes(std::span<const BitVector* const> votes) {
  if (votes.empty()) return make_error(ErrorCode::kPrecondition, "majority vote of no votes");
  for (std::size_t i = 0; i < votes.size(); ++i) {
    if (votes[i] == nullptr) return make_error(ErrorCode::kInvalidArgument, "vote " + std::to_string(i) + " is null");
    if (votes[i]->size() != votes[0]->size())
      return make_error(ErrorCode::kInvalidArgument, "vote " + std::to_string(i) + " has " +
                                                         std::to_string(votes[i]->size()) + " signs, vote 0 has " +
                                                         std::to_string(votes[0]->size()));
  }
  return {};
}

std::vector<const BitVector*> pointers(std::span<const BitVector> votes) {
  std::vector<const BitVector*> out;
  out.reserve(votes.size());
  for (const auto& vote : votes) out.push_back(&vote);
  return out;
}

}  // namespace

Result<BitVector> majority_vote(std::span<const BitVector* const> votes) {
  BALLOT_TRY(check_votes(votes));
  BitVector out(votes[0]->size());
  kernels::majority_vote(votes, out);
  return out;
}

Result<BitVector> majority_vote(std::span<const BitVector> votes) {
  const auto ptrs = pointers(votes);
  return majority_vote(std::span<const BitVector* const>(ptrs));
}

Result<BitVector> weighted_majority_vote(std::span<const BitVector> votes, std::span<const std::uint32_t> weights) {
  const auto ptrs = pointers(votes);
  BALLOT_TRY(check_votes(ptrs));
  if (weights.size() != votes.size())
    return make_error(ErrorCode::kInvalidArgument,
                      std::to_string(weights.size()) + " weights for " + std::to_string(votes.size()) + " votes");
  std::uint64_t total = 0;
  for (auto w : weights) total += w;
  if (total == 0) return make_error(ErrorCode::kInvalidArgument, "weighted vote with total weight 0");
  if (total >= (std::uint64_t{1} << 32))
    return make_error(ErrorCode::kInvalidArgument, "total weight " + std::to_string(total) + " is not below 2^32");
  BitVector out(votes[0].size());
  kernels::weighted_majority_vote(ptrs, weights, out);
  return out;
}

}  // namespace ballot::robust

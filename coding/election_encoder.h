// Election-coding encoder (a node's vote) and decoder (the server's vote) over packed signs
// (Sohn et al., NeurIPS 2020; ALGORITHMS.md §3; DESIGN.md round protocol step 2).
//
//   encoder, node i:  c_i = maj_{j : G[i][j] = 1} sign(g_j)   coordinate-wise, 1 bit out
//   decoder, server:  v   = maj_i c_i
// Ties go to +1 and an empty vote is all +1 (kernels/majority_vote.h). With G = I this is
// signSGD with majority vote.
//
// Two placements of G:
//  - replicated: node i holds the signs of all its partitions (it computed them itself);
//  - exchange: node i received the signed inputs of the sources of its row, some of them late,
//    invalid or absent. Inputs from a source outside row i, of the wrong size, or equivocating
//    (one source, two different vectors) are not counted; a missing input abstains. The vote
//    records exactly which sources it counted, so the server can audit it against the signed
//    inputs.
// Cost: one bit-sliced majority over the row, O(|row| · d/64 · log|row|) word operations.
// Deterministic; thread-safe for distinct outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "coding/allocation_matrix.h"
#include "core/bit_vector.h"

namespace ballot::coding {

// Replicated placement: partition_signs[j] is sign(g_j) for every partition j (only the ones in
// row `node` are read; all must have one size). Preconditions (BALLOT_ENFORCE): node < n,
// partition_signs.size() == n.
void encode_replicated(const AllocationMatrix& g, std::size_t node, std::span<const BitVector> partition_signs,
                       BitVector& vote);

// One input received by a node in exchange placement (already authenticated by the transport).
struct ExchangeInput {
  std::uint32_t source = 0;          // the partition / node that produced it
  const BitVector* signs = nullptr;  // null = announced but unusable (e.g. bad signature)
};

enum class InputRejection : std::uint8_t {
  kNotInRow,      // source is not a partition of this node's row (or out of range)
  kWrongSize,     // not `dimension` coordinates
  kEquivocation,  // the same source sent two different vectors: neither is counted
  kNull,          // no vector attached
};
const char* input_rejection_name(InputRejection reason) noexcept;

struct ExchangeVote {
  BitVector vote;
  std::vector<std::uint32_t> counted;  // sources whose input is in the vote, ascending
  std::vector<std::uint32_t> missing;  // sources of the row that abstained (no usable input)
  std::vector<std::pair<std::uint32_t, InputRejection>> rejected;  // in input order
};

// Exchange placement. `inputs` come from peers, so nothing about them is trusted: every problem
// is recorded, never asserted. A duplicate identical input counts once. Preconditions: node < n.
ExchangeVote encode_exchange(const AllocationMatrix& g, std::size_t node, std::size_t dimension,
                             std::span<const ExchangeInput> inputs);

// Server: v = maj_i votes[i] (votes present; all of one size).
void decode(std::span<const BitVector> votes, BitVector& out);

// The whole replicated election without attack: every node's vote, then the decoder. For tests,
// simulation and the report.
void elect_replicated(const AllocationMatrix& g, std::span<const BitVector> partition_signs,
                      std::vector<BitVector>& votes, BitVector& out);

}  // namespace ballot::coding

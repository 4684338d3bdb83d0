// Fuzz target: the round-protocol payloads a server and a node receive from peers.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "runtime/messages.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  // Dimensions around word boundaries, as a model's parameter count would be.
  for (std::size_t dimension : {0u, 1u, 64u, 65u, 130u}) {
    if (auto vote = ballot::runtime::decode_vote(bytes, dimension); vote.ok()) {
      if (vote->signs.size() != dimension || !vote->signs.padding_is_clear()) __builtin_trap();
      if (ballot::runtime::encode(*vote).size() != size) __builtin_trap();
    }
    if (auto vote = ballot::runtime::decode_audited_vote(bytes, dimension, 7); vote.ok()) {
      if (vote->vote.signs.size() != dimension || vote->inputs.size() > 7) __builtin_trap();
      if (ballot::runtime::encode(*vote).size() != size) __builtin_trap();
    }
    if (auto decision = ballot::runtime::decode_decision(bytes, dimension); decision.ok()) {
      if (ballot::runtime::encode(*decision).size() != size) __builtin_trap();
    }
    if (auto piece = ballot::runtime::decode_vote_piece(bytes, dimension); piece.ok()) {
      const std::size_t words = (dimension + 63) / 64;
      if (piece->count == 0 || piece->index >= piece->count || piece->count > (words > 0 ? words : 1)) __builtin_trap();
      const auto length = ballot::runtime::vote_piece_word(words, piece->index + 1, piece->count) -
                          ballot::runtime::vote_piece_word(words, piece->index, piece->count);
      if (piece->words.size() != length || ballot::runtime::encode(*piece).size() != size) __builtin_trap();
      // A vote of this one piece, when it is the whole vote, has clear padding or is refused.
      ballot::runtime::VoteAssembly assembly;
      if (auto vote = assembly.add(*piece); vote.ok() && vote->has_value()) {
        if ((*vote)->signs.size() != dimension || !(*vote)->signs.padding_is_clear()) __builtin_trap();
      }
    }
  }
  if (auto vote = ballot::runtime::decode_encoded_vote(bytes, 4096); vote.ok()) {
    if (vote->bytes.size() > 4096 || ballot::runtime::encode(*vote).size() != size) __builtin_trap();
  }
  // One encoding per direction: what decodes encodes to the same bytes (dense or sparse form). A
  // sparse decision's listed entries are exactly the direction's (not +0, rising), whatever memory
  // it was decoded into, and the digest read off the bytes is the direction's.
  for (std::size_t dimension : {0u, 3u, 100u}) {
    std::optional<ballot::coding::SparseGradient> listed;
    if (auto decision = ballot::runtime::decode_float_decision(bytes, dimension, &listed, std::vector<float>(7, 1.0f));
        decision.ok()) {
      const auto& direction = decision->direction;
      if (direction.size() != dimension) __builtin_trap();
      const auto again = ballot::runtime::encode(*decision);
      if (again.size() != size || !std::equal(again.begin(), again.end(), bytes.begin())) __builtin_trap();
      if (ballot::runtime::direction_digest_of_decision(bytes) != ballot::runtime::direction_digest(direction)) {
        __builtin_trap();
      }
      if (listed.has_value() != (bytes[8 + 4 + 4 + 1 + 8] == 1)) __builtin_trap();  // only the sparse form lists
      if (listed) {
        std::size_t k = 0;
        for (std::size_t i = 0; i < dimension; ++i) {
          std::uint32_t bits = 0;
          std::memcpy(&bits, &direction[i], 4);
          if (bits == 0) continue;
          std::uint32_t listed_bits = 0;
          if (k < listed->values.size()) std::memcpy(&listed_bits, &listed->values[k], 4);
          if (k >= listed->indices.size() || listed->indices[k] != i || listed_bits != bits) __builtin_trap();
          ++k;
        }
        if (k != listed->indices.size() || k != listed->values.size()) __builtin_trap();
      }
    } else if (listed) {
      __builtin_trap();
    }
  }
  // Pieces of decisions of at most 64 and 100 bytes, in at most 7 pieces.
  for (std::uint64_t total : {64u, 100u}) {
    if (auto piece = ballot::runtime::decode_decision_piece(bytes, total, 7); piece.ok()) {
      if (piece->count == 0 || piece->count > 7 || piece->index >= piece->count || piece->total > total) {
        __builtin_trap();
      }
      const auto length = ballot::runtime::piece_offset(piece->total, piece->index + 1, piece->count) -
                          ballot::runtime::piece_offset(piece->total, piece->index, piece->count);
      if (piece->bytes.size() != length || ballot::runtime::encode(*piece).size() != size) __builtin_trap();
    }
  }
  if (auto relayed = ballot::runtime::decode_relayed_piece(bytes); relayed.ok()) {
    if (ballot::runtime::encode(*relayed).size() != size) __builtin_trap();
  }
  (void)ballot::runtime::decode_round_start(bytes);
  if (auto control = ballot::runtime::decode_control(bytes); control.ok()) {
    if (std::holds_alternative<ballot::runtime::Evidence>(*control) &&
        ballot::runtime::encode(std::get<ballot::runtime::Evidence>(*control)).size() != size) {
      __builtin_trap();
    }
  }
  return 0;
}

#include "runtime/messages.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "core/byte_io.h"

namespace ballot::runtime {
namespace {

using learning::StepScale;

BitVector pattern(std::size_t d) {
  BitVector bits(d);
  for (std::size_t i = 0; i < d; i += 5) bits.set(i, true);
  return bits;
}

TEST(Messages, RoundTrips) {
  RoundStart start{42, 1500, {}};
  start.model_digest[3] = 7;
  auto decoded_start = decode_round_start(encode(start));
  ASSERT_TRUE(decoded_start.ok());
  EXPECT_EQ(decoded_start->round, 42u);
  EXPECT_EQ(decoded_start->deadline_ms, 1500u);
  EXPECT_EQ(decoded_start->model_digest, start.model_digest);

  Vote vote{7, 0.25, {}, pattern(130)};
  vote.model_digest[0] = 1;
  auto decoded_vote = decode_vote(encode(vote), 130);
  ASSERT_TRUE(decoded_vote.ok());
  EXPECT_EQ(decoded_vote->round, 7u);
  EXPECT_EQ(decoded_vote->loss, 0.25);
  EXPECT_EQ(decoded_vote->signs, vote.signs);
  EXPECT_EQ(decoded_vote->model_digest, vote.model_digest);

  Decision decision{9, {0.001f, 0.0001f}, true, pattern(64)};
  auto decoded_decision = decode_decision(encode(decision), 64);
  ASSERT_TRUE(decoded_decision.ok());
  EXPECT_EQ(decoded_decision->signs, decision.signs);
  EXPECT_EQ(decoded_decision->scale, decision.scale);  // the float bits as sent

  Join sent_join{5, {}};
  sent_join.state_digest[31] = 7;
  auto join = decode_control(encode(sent_join));
  ASSERT_TRUE(join.ok());
  EXPECT_EQ(std::get<Join>(*join).round, 5u);
  EXPECT_EQ(std::get<Join>(*join).state_digest, sent_join.state_digest);
  const auto join_bytes = encode(sent_join);
  for (std::size_t length = 0; length < join_bytes.size(); ++length) {
    EXPECT_FALSE(decode_control(std::span(join_bytes).first(length)).ok()) << length;
  }
  auto finish = decode_control(encode(Finish{11}));
  ASSERT_TRUE(finish.ok());
  EXPECT_EQ(std::get<Finish>(*finish).rounds, 11u);
}

// A reported loss is its sender's claim: NaN and infinities are left out of the mean, which is NaN
// when nothing finite was reported.
TEST(FiniteLossMean, LeavesOutWhatIsNotFinite) {
  FiniteLossMean mean;
  EXPECT_TRUE(std::isnan(mean.value()));
  mean.add(std::numeric_limits<double>::quiet_NaN());
  mean.add(-std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(mean.value()));
  mean.add(0.25);
  mean.add(0.75);
  mean.add(std::numeric_limits<double>::infinity());
  EXPECT_EQ(mean.value(), 0.5);
}

TEST(Messages, VoteSizeIsTheSignsPlusFiftySixBytes) {
  EXPECT_EQ(encode(Vote{0, 0, {}, BitVector(101770)}).size(), 8 + 8 + 32 + 8 + 8 * 1591u);
}

TEST(Messages, EveryTruncationAndTrailingByteIsMalformed) {
  const auto vote = encode(Vote{1, 0.5, {}, pattern(200)});
  for (std::size_t length = 0; length < vote.size(); ++length) {
    auto decoded = decode_vote(std::span(vote).first(length), 200);
    ASSERT_FALSE(decoded.ok()) << length;
    EXPECT_EQ(decoded.error().code, ErrorCode::kMalformed);
  }
  auto longer = vote;
  longer.push_back(0);
  EXPECT_FALSE(decode_vote(longer, 200).ok());
  const auto start = encode(RoundStart{});
  for (std::size_t length = 0; length < start.size(); ++length) {
    EXPECT_FALSE(decode_round_start(std::span(start).first(length)).ok());
  }
}

TEST(Messages, WrongDimensionIsRejectedBeforeReadingTheSigns) {
  // A vote announcing 2^63 coordinates is refused on the dimension field alone.
  auto vote = encode(Vote{1, 0.5, {}, pattern(200)});
  EXPECT_NE(decode_vote(vote, 201).error().message.find("200 coordinates"), std::string::npos);
  for (int i = 0; i < 8; ++i) vote[48 + i] = 0xff;  // round 8 | loss 8 | digest 32 | dimension
  EXPECT_FALSE(decode_vote(vote, 200).ok());
}

TEST(Messages, DecisionsCarryTheScaleBitsAndRefuseAnUnusableOne) {
  const float smallest = std::numeric_limits<float>::denorm_min();
  for (StepScale scale : {StepScale{0.0f, 0.0f}, StepScale{smallest, 1e-4f}, StepScale{3.0e38f, 0.5f}}) {
    EXPECT_EQ(decode_decision(encode(Decision{2, scale, false, pattern(70)}), 70)->scale, scale);
    EXPECT_EQ(decode_float_decision(encode(FloatDecision{2, scale, false, {1.0f}}), 1)->scale, scale);
  }
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (StepScale scale :
       {StepScale{-0.001f, 0.0f}, StepScale{-0.0f, 0.0f}, StepScale{nan, 0.0f}, StepScale{inf, 0.0f},
        StepScale{0.001f, -1.0f}, StepScale{0.001f, -0.0f}, StepScale{0.001f, nan}, StepScale{0.001f, inf}}) {
    auto signs = decode_decision(encode(Decision{2, scale, false, pattern(70)}), 70);
    ASSERT_FALSE(signs.ok());
    EXPECT_EQ(signs.error().code, ErrorCode::kMalformed);
    const bool bad_lr = std::isnan(scale.lr) || !(scale.lr >= 0) || std::isinf(scale.lr) || std::signbit(scale.lr);
    EXPECT_NE(signs.error().message.find(bad_lr ? "learning rate" : "weight decay"), std::string::npos)
        << signs.error().message;
    EXPECT_EQ(decode_float_decision(encode(FloatDecision{2, scale, false, {1.0f}}), 1).error().code,
              ErrorCode::kMalformed);
  }
  // The full-digest flag is one byte, 0 or 1.
  EXPECT_TRUE(decode_decision(encode(Decision{2, {}, true, pattern(70)}), 70)->full_digest);
  EXPECT_FALSE(decode_decision(encode(Decision{2, {}, false, pattern(70)}), 70)->full_digest);
  auto flagged = encode(Decision{2, {}, true, pattern(70)});
  flagged[16] = 2;  // round 8 | η 4 | λ 4 | flag
  EXPECT_NE(decode_decision(flagged, 70).error().message.find("full digest flag"), std::string::npos);
  // round u64 | η f32 | λ f32 | flag u8 | dimension u64 | words
  EXPECT_EQ(encode(Decision{0, {}, false, BitVector(64)}).size(), 8 + 4 + 4 + 1 + 8 + 8u);
}

TEST(Messages, PaddingBitsAndUnknownTagsAreMalformed) {
  auto decision = encode(Decision{1, {}, false, pattern(65)});
  decision.back() |= 0x80;  // a bit past coordinate 64 in the last word
  EXPECT_EQ(decode_decision(decision, 65).error().code, ErrorCode::kMalformed);
  auto control = encode(Join{1});
  control[0] = 'X';
  EXPECT_FALSE(decode_control(control).ok());
  EXPECT_FALSE(decode_control({}).ok());
}

TEST(Messages, GradientPathPayloads) {
  EncodedVote vote{4, 1.5, {}, {1, 2, 3, 4, 5}};
  auto decoded = decode_encoded_vote(encode(vote), 100);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->bytes, vote.bytes);
  EXPECT_EQ(decode_encoded_vote(encode(vote), 4).error().code, ErrorCode::kLimitExceeded);
  const auto bytes = encode(vote);
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    EXPECT_FALSE(decode_encoded_vote(std::span(bytes).first(length), 100).ok());
  }

  FloatDecision decision{4, {0.05f, 0.0f}, false, {1.0f, -2.5f, 0.0f}};
  auto decoded_decision = decode_float_decision(encode(decision), 3);
  ASSERT_TRUE(decoded_decision.ok());
  EXPECT_EQ(decoded_decision->direction, decision.direction);
  EXPECT_EQ(decoded_decision->scale, decision.scale);
  EXPECT_FALSE(decode_float_decision(encode(decision), 4).ok());
}

std::uint32_t float_bits(float value) { return std::bit_cast<std::uint32_t>(value); }

// A direction of few nonzero coordinates goes in the sparse form, 8 bytes an entry; -0 and NaN
// are entries like any value, and what it leaves out comes back as +0, bit for bit.
TEST(Messages, SparseDirectionsTravelAsTheirEntries) {
  const std::size_t d = 100;
  FloatDecision sparse{7, {0.1f, 0.001f}, true, std::vector<float>(d, 0.0f)};
  sparse.direction[3] = 1.5f;
  sparse.direction[40] = -0.0f;
  sparse.direction[99] = std::numeric_limits<float>::quiet_NaN();
  const auto bytes = encode(sparse);
  const std::size_t head = 8 + 4 + 4 + 1 + 8 + 1;  // round, η, λ, full digest, dimension, form
  EXPECT_EQ(bytes.size(), head + 8 + 3 * 8);
  EXPECT_LT(bytes.size(), decision_bytes(d, false));
  auto decoded = decode_float_decision(bytes, d);
  ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
  ASSERT_EQ(decoded->direction.size(), d);
  for (std::size_t i = 0; i < d; ++i)
    EXPECT_EQ(float_bits(decoded->direction[i]), float_bits(sparse.direction[i])) << i;
  EXPECT_EQ(decoded->round, 7u);
  EXPECT_TRUE(decoded->full_digest);
  EXPECT_EQ(encode(*decoded), bytes);

  // The form flips where the sparse body stops being smaller: 8 + 8·count < 4·d.
  for (std::size_t entries : {std::size_t{48}, std::size_t{49}}) {
    FloatDecision at{1, {0.1f, 0.0f}, false, std::vector<float>(d, 0.0f)};
    for (std::size_t i = 0; i < entries; ++i) at.direction[2 * i] = 1.0f;
    const auto encoded = encode(at);
    EXPECT_EQ(encoded.size(), entries == 48 ? head + 8 + 8 * entries : decision_bytes(d, false)) << entries;
    auto back = decode_float_decision(encoded, d);
    ASSERT_TRUE(back.ok()) << back.error().to_string();
    EXPECT_EQ(back->direction, at.direction);
  }
  // An all-zero direction is the sparse form with no entry; d = 0 and d = 2 stay dense.
  EXPECT_EQ(encode(FloatDecision{1, {0.1f, 0.0f}, false, std::vector<float>(d, 0.0f)}).size(), head + 8);
  EXPECT_EQ(encode(FloatDecision{1, {0.1f, 0.0f}, false, {}}).size(), decision_bytes(0, false));
  EXPECT_EQ(encode(FloatDecision{1, {0.1f, 0.0f}, false, {0.0f, 0.0f}}).size(), decision_bytes(2, false));
}

// The state chain's digest of a direction is the payload digest of its body on the wire (after
// the form byte): the entries when sparse, the d floats when dense. One digest per direction.
TEST(Messages, DirectionDigestIsThatOfTheBodyOnTheWire) {
  const std::size_t head = 8 + 4 + 4 + 1 + 8 + 1;  // round, η, λ, full digest, dimension, form
  auto body_digest = [&](const std::vector<float>& direction) {
    const auto bytes = encode(FloatDecision{3, {0.1f, 0.0f}, false, direction});
    return transport::payload_digest(std::span<const std::uint8_t>(bytes).subspan(head));
  };
  std::vector<float> sparse(100, 0.0f);
  sparse[3] = 1.5f;
  sparse[40] = -0.0f;
  sparse[99] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(direction_digest(sparse), body_digest(sparse));
  std::vector<float> dense(100, 0.25f);
  EXPECT_EQ(direction_digest(dense), body_digest(dense));
  EXPECT_EQ(direction_digest(dense),
            transport::payload_digest({reinterpret_cast<const std::uint8_t*>(dense.data()), 4 * dense.size()}));
  EXPECT_EQ(direction_digest({}), body_digest({}));

  // Every change of one coordinate changes it: a value, −0 against +0, and across the form's
  // threshold (48 entries sparse, 49 dense at d = 100).
  auto other = sparse;
  other[40] = 0.0f;
  EXPECT_NE(direction_digest(other), direction_digest(sparse));
  other = sparse;
  other[3] = std::nextafter(1.5f, 2.0f);
  EXPECT_NE(direction_digest(other), direction_digest(sparse));
  std::vector<float> at(100, 0.0f);
  for (std::size_t i = 0; i < 48; ++i) at[2 * i] = 1.0f;
  const auto sparse_form = direction_digest(at);
  at[97] = 1.0f;
  EXPECT_EQ(direction_digest(at), body_digest(at));
  EXPECT_NE(direction_digest(at), sparse_form);
}

// The digest read off an encoded decision is the one computed from its direction, in both forms,
// and the decoder lists a sparse decision's indices (nothing for a dense one).
TEST(Messages, DirectionDigestOfADecisionIsItsDirectionsDigest) {
  std::vector<float> sparse(100, 0.0f);
  sparse[3] = 1.5f;
  sparse[40] = -0.0f;
  sparse[99] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> dense(100, 0.25f);
  const std::vector<std::vector<float>> directions{sparse, dense, std::vector<float>(100, 0.0f)};
  for (const auto& direction : directions) {
    const auto bytes = encode(FloatDecision{3, {0.1f, 0.0f}, true, direction});
    EXPECT_EQ(direction_digest_of_decision(bytes), direction_digest(direction));
    std::optional<coding::SparseGradient> listed;
    // The direction may take a vector's memory whatever it held.
    const auto decoded = decode_float_decision(bytes, 100, &listed, std::vector<float>(300, 7.0f));
    ASSERT_TRUE(decoded.ok()) << decoded.error().message;
    EXPECT_EQ(std::memcmp(decoded->direction.data(), direction.data(), 400), 0);
    EXPECT_EQ(decoded->direction.size(), 100u);
    if (direction == dense) {
      EXPECT_FALSE(listed.has_value());
      continue;
    }
    ASSERT_TRUE(listed.has_value());
    std::vector<std::uint64_t> expected;
    for (std::uint32_t i = 0; i < 100; ++i) {
      if (std::bit_cast<std::uint32_t>(direction[i]) != 0) expected.push_back(i);
    }
    EXPECT_EQ(listed->indices, expected);
    ASSERT_EQ(listed->values.size(), expected.size());
    for (std::size_t k = 0; k < expected.size(); ++k) {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(listed->values[k]), std::bit_cast<std::uint32_t>(direction[expected[k]]));
    }
  }
  // A refused decision lists nothing.
  auto cut = encode(FloatDecision{3, {0.1f, 0.0f}, false, sparse});
  cut.pop_back();
  std::optional<coding::SparseGradient> listed = coding::SparseGradient{{1}, {1.0f}};
  EXPECT_FALSE(decode_float_decision(cut, 100, &listed).ok());
  EXPECT_FALSE(listed.has_value());
}

// Sparse forms a server never sends: each is malformed, and every cut of a valid one too.
TEST(Messages, MalformedSparseDirectionsAreRefused) {
  const std::size_t d = 100;
  FloatDecision sparse{7, {0.1f, 0.0f}, false, std::vector<float>(d, 0.0f)};
  sparse.direction[10] = 2.0f;
  sparse.direction[20] = -3.0f;
  const auto bytes = encode(sparse);
  const std::size_t form = 8 + 4 + 4 + 1 + 8, count = form + 1, indices = count + 8, values = indices + 8;
  ASSERT_EQ(bytes[form], 1);
  ASSERT_EQ(bytes.size(), values + 8);
  const auto refused = [&](auto change, const char* what) {
    auto changed = bytes;
    change(changed);
    auto decoded = decode_float_decision(changed, d);
    ASSERT_FALSE(decoded.ok()) << what;
    EXPECT_EQ(decoded.error().code, ErrorCode::kMalformed) << what;
  };
  const auto put32 = [](std::vector<std::uint8_t>& b, std::size_t at, std::uint32_t v) { std::memcpy(&b[at], &v, 4); };
  refused([&](auto& b) { b[form] = 2; }, "an unknown form");
  refused([&](auto& b) { put32(b, indices, 20); }, "indices not rising (20, 20)");
  refused([&](auto& b) { put32(b, indices + 4, 5); }, "indices falling (10, 5)");
  refused([&](auto& b) { put32(b, indices + 4, 100); }, "an index past the dimension");
  refused([&](auto& b) { put32(b, values, 0); }, "a +0 entry");
  refused([&](auto& b) { b[count] = 3; }, "a count past the entries");
  refused([&](auto& b) { b[count + 7] = 0x80; }, "a huge count");
  refused([&](auto& b) { b.push_back(0); }, "a byte after the values");
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    EXPECT_FALSE(decode_float_decision(std::span(bytes).first(length), d).ok()) << length;
  }
  // The dense form of a direction the sparse form holds in fewer bytes: not the encoder's choice.
  ByteWriter dense;
  dense.put_bytes(std::span(bytes).first(form))
      .put<std::uint8_t>(0)
      .put_array(std::span<const float>(sparse.direction));
  EXPECT_FALSE(decode_float_decision(dense.bytes(), d).ok());
  // Neither is a sparse form as large as the dense one: 49 entries of 100 coordinates.
  ByteWriter large;
  large.put_bytes(std::span(bytes).first(form)).put<std::uint8_t>(1).put<std::uint64_t>(49);
  for (std::uint32_t i = 0; i < 49; ++i) large.put<std::uint32_t>(i);
  for (std::uint32_t i = 0; i < 49; ++i) large.put<float>(1.0f);
  EXPECT_FALSE(decode_float_decision(large.bytes(), d).ok());
}

// Exchange placement: the vote with the signed envelopes of the inputs it counted.
AuditedVote audited(std::size_t d) {
  AuditedVote vote{{3, 0.75, {}, pattern(d)}, {}};
  for (transport::NodeId author : {2u, 4u, 5u}) {
    transport::SignedEnvelope envelope;
    envelope.header.job = 9;
    envelope.header.sender = author;
    envelope.header.role = transport::Role::kNode;
    envelope.header.type = transport::MessageType::kPartitionSigns;
    envelope.header.round = 3;
    envelope.header.sequence = 100 + author;
    envelope.header.payload_length = 1234;
    envelope.header.payload_digest[0] = static_cast<std::uint8_t>(author);
    envelope.signature[5] = 0x5a;
    vote.inputs.push_back(envelope);
  }
  return vote;
}

TEST(Messages, EvidenceRoundTripsAndMalformedIsRejected) {
  const auto vote = audited(64);
  transport::EquivocationProof proof{vote.inputs[0], vote.inputs[1]};
  const auto bytes = encode(Evidence{proof});
  EXPECT_EQ(bytes.size(), 4 + 2 * transport::kEnvelopeMetaSize);
  auto decoded = decode_control(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
  ASSERT_TRUE(std::holds_alternative<Evidence>(*decoded));
  EXPECT_EQ(std::get<Evidence>(*decoded).proof.first, proof.first);
  EXPECT_EQ(std::get<Evidence>(*decoded).proof.second, proof.second);
  for (std::size_t length = 4; length < bytes.size(); ++length) {
    EXPECT_FALSE(decode_control(std::span(bytes).first(length)).ok()) << length;
  }
  auto longer = bytes;
  longer.push_back(0);
  EXPECT_FALSE(decode_control(longer).ok());
  auto bad_role = bytes;
  bad_role[4 + 12] = 0x77;
  EXPECT_FALSE(decode_control(bad_role).ok());
}

TEST(Messages, AuditedVoteRoundTrips) {
  const auto vote = audited(130);
  const auto bytes = encode(vote);
  EXPECT_EQ(bytes.size(), encode(vote.vote).size() + 4 + 3 * transport::kEnvelopeMetaSize);
  auto decoded = decode_audited_vote(bytes, 130, 5);
  ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
  EXPECT_EQ(decoded->vote.round, 3u);
  EXPECT_EQ(decoded->vote.loss, 0.75);
  EXPECT_EQ(decoded->vote.signs, vote.vote.signs);
  EXPECT_EQ(decoded->inputs, vote.inputs);
  // No inputs at all (every source abstained) is a valid vote too.
  AuditedVote empty{vote.vote, {}};
  ASSERT_TRUE(decode_audited_vote(encode(empty), 130, 5).ok());
  EXPECT_TRUE(decode_audited_vote(encode(empty), 130, 5)->inputs.empty());
}

TEST(Messages, MalformedAuditedVotesAreRejected) {
  const auto vote = audited(130);
  const auto bytes = encode(vote);
  // Every truncation, a trailing byte, another dimension.
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    auto decoded = decode_audited_vote(std::span(bytes).first(length), 130, 5);
    ASSERT_FALSE(decoded.ok()) << length;
    EXPECT_EQ(decoded.error().code, ErrorCode::kMalformed);
  }
  auto longer = bytes;
  longer.push_back(0);
  EXPECT_FALSE(decode_audited_vote(longer, 130, 5).ok());
  EXPECT_FALSE(decode_audited_vote(bytes, 129, 5).ok());
  // More inputs than nodes: refused on the count alone, before reading (or allocating) them.
  EXPECT_FALSE(decode_audited_vote(bytes, 130, 2).ok());
  const std::size_t count_at = encode(vote.vote).size();
  auto huge = bytes;
  for (int i = 0; i < 4; ++i) huge[count_at + i] = 0xff;
  EXPECT_NE(decode_audited_vote(huge, 130, 5).error().message.find("inputs, at most"), std::string::npos);
  // An envelope that is not a gradient's, one with an unknown type, non-zero reserved bytes.
  const std::size_t first = count_at + 4;
  auto not_gradient = vote;
  not_gradient.inputs[1].header.type = transport::MessageType::kVote;
  EXPECT_FALSE(decode_audited_vote(encode(not_gradient), 130, 5).ok());
  auto bad_type = bytes;
  bad_type[first + 13] = 0xee;
  EXPECT_FALSE(decode_audited_vote(bad_type, 130, 5).ok());
  auto reserved = bytes;
  reserved[first + 14] = 1;
  EXPECT_FALSE(decode_audited_vote(reserved, 130, 5).ok());
  // Authors out of order or repeated: a voter lists each source once, ascending.
  auto unordered = vote;
  std::swap(unordered.inputs[0], unordered.inputs[2]);
  EXPECT_FALSE(decode_audited_vote(encode(unordered), 130, 5).ok());
  auto repeated = vote;
  repeated.inputs[1] = repeated.inputs[0];
  EXPECT_FALSE(decode_audited_vote(encode(repeated), 130, 5).ok());
  // A replicated-placement vote is not an audited one (no count), and vice versa.
  EXPECT_FALSE(decode_audited_vote(encode(vote.vote), 130, 5).ok());
  EXPECT_FALSE(decode_vote(bytes, 130).ok());
}

}  // namespace
// Relayed decisions: the pieces cut a payload of `total` bytes at total·i/count, so every piece's
// length follows from (index, count, total) and nothing else.
TEST(Messages, DecisionPiecesCoverThePayloadExactlyOnce) {
  for (std::uint64_t total : {0u, 1u, 7u, 100u, 1400056u}) {
    for (std::uint32_t count : {1u, 2u, 3u, 8u, 15u}) {
      std::uint64_t covered = 0;
      for (std::uint32_t i = 0; i < count; ++i) {
        EXPECT_EQ(piece_offset(total, i, count), covered);
        covered = piece_offset(total, i + 1, count);
      }
      EXPECT_EQ(covered, total);
    }
  }
  EXPECT_EQ(piece_offset(UINT64_MAX, 3, 4), UINT64_MAX / 4 * 3 + 2);  // no overflow in the product
  EXPECT_EQ(decision_bytes(65, true), encode(Decision{1, {0.1f, 0.0f}, false, BitVector(65)}).size());
  EXPECT_EQ(decision_bytes(3, false), encode(FloatDecision{1, {0.1f, 0.0f}, false, {1.0f, 2.0f, 3.0f}}).size());
}

TEST(Messages, DecisionPiecesRoundTripAndMalformedOnesAreRejected) {
  const std::uint64_t total = 100;
  // Piece 1 of 3 of 100 bytes: [33, 66).
  const std::vector<std::uint8_t> bytes(piece_offset(total, 2, 3) - piece_offset(total, 1, 3), 0x5a);
  ASSERT_EQ(bytes.size(), 33u);
  const DecisionPiece piece{12, 1, 3, total, bytes};
  auto decoded = decode_decision_piece(encode(piece), total, 3);
  ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
  EXPECT_EQ(decoded->round, 12u);
  EXPECT_EQ(decoded->index, 1u);
  EXPECT_EQ(decoded->count, 3u);
  EXPECT_EQ(decoded->bytes, bytes);
  // A decision larger than the model's largest, more pieces than nodes, an index past the count,
  // a byte more or less than the piece's range: each is malformed. A smaller decision (a sparse
  // direction) is a piece like any other.
  EXPECT_FALSE(decode_decision_piece(encode(piece), total - 1, 3).ok());
  EXPECT_TRUE(decode_decision_piece(encode(piece), total + 1, 3).ok());
  EXPECT_FALSE(decode_decision_piece(encode(piece), total, 2).ok());
  EXPECT_FALSE(decode_decision_piece(encode(DecisionPiece{12, 3, 3, total, bytes}), total, 3).ok());
  EXPECT_FALSE(decode_decision_piece(encode(DecisionPiece{12, 0, 0, total, {}}), total, 3).ok());
  auto longer = piece;
  longer.bytes.push_back(0);
  EXPECT_FALSE(decode_decision_piece(encode(longer), total, 3).ok());
  auto shorter = piece;
  shorter.bytes.pop_back();
  EXPECT_FALSE(decode_decision_piece(encode(shorter), total, 3).ok());
  EXPECT_FALSE(decode_decision_piece({}, total, 3).ok());
}

TEST(Messages, VotePiecesRoundTripAndMalformedOnesAreRejected) {
  const std::size_t d = 130;  // 3 words, the last one of 2 coordinates
  EXPECT_EQ(vote_piece_word(3, 0, 2), 0u);
  EXPECT_EQ(vote_piece_word(3, 1, 2), 1u);
  EXPECT_EQ(vote_piece_word(3, 2, 2), 3u);
  transport::Digest digest{};
  digest[3] = 7;
  const VotePiece piece{12, 0.25, digest, d, 1, 2, {0xfedcba9876543210ULL, 2}};
  auto decoded = decode_vote_piece(encode(piece), d);
  ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
  EXPECT_EQ(decoded->round, 12u);
  EXPECT_EQ(decoded->loss, 0.25);
  EXPECT_EQ(decoded->model_digest, digest);
  EXPECT_EQ(decoded->index, 1u);
  EXPECT_EQ(decoded->count, 2u);
  EXPECT_EQ(decoded->words, piece.words);
  // Another model's dimension, no pieces, more pieces than words, an index past the count, a word
  // more or less than the piece's range: each is malformed.
  EXPECT_FALSE(decode_vote_piece(encode(piece), d + 64).ok());
  EXPECT_FALSE(decode_vote_piece(encode(VotePiece{12, 0.25, digest, d, 0, 0, {}}), d).ok());
  EXPECT_FALSE(decode_vote_piece(encode(VotePiece{12, 0.25, digest, d, 0, 4, {}}), d).ok());
  EXPECT_FALSE(decode_vote_piece(encode(VotePiece{12, 0.25, digest, d, 2, 2, {1}}), d).ok());
  auto longer = piece;
  longer.words.push_back(0);
  EXPECT_FALSE(decode_vote_piece(encode(longer), d).ok());
  auto shorter = piece;
  shorter.words.pop_back();
  EXPECT_FALSE(decode_vote_piece(encode(shorter), d).ok());
  EXPECT_FALSE(decode_vote_piece({}, d).ok());
  // One piece of a vote of no coordinates.
  EXPECT_TRUE(decode_vote_piece(encode(VotePiece{1, 0.0, digest, 0, 0, 1, {}}), 0).ok());
}

TEST(Messages, VoteAssemblyGivesTheWholeVoteAndRefusesContradictions) {
  const std::size_t d = 300;  // 5 words
  BitVector signs(d);
  for (std::size_t i = 0; i < d; ++i) signs.set(i, (i * 7) % 3 == 0);
  transport::Digest digest{};
  digest[0] = 1;
  const auto piece = [&](std::uint32_t index, std::uint32_t count, double loss = 0.5) {
    const std::size_t begin = vote_piece_word(5, index, count), end = vote_piece_word(5, index + 1, count);
    return VotePiece{4,
                     loss,
                     digest,
                     d,
                     index,
                     count,
                     std::vector<std::uint64_t>(signs.words().begin() + begin, signs.words().begin() + end)};
  };
  VoteAssembly assembly;
  for (std::uint32_t index : {2u, 0u}) {
    auto partial = assembly.add(piece(index, 3));
    ASSERT_TRUE(partial.ok());
    EXPECT_FALSE(partial->has_value());
  }
  EXPECT_FALSE(assembly.add(piece(2, 3))->has_value());  // a repeat changes nothing
  auto other = piece(0, 3);
  other.words[0] ^= 1;
  EXPECT_EQ(assembly.add(other).error().code, ErrorCode::kMalformed);              // other words for piece 0
  EXPECT_EQ(assembly.add(piece(1, 3, 0.75)).error().code, ErrorCode::kMalformed);  // another loss
  EXPECT_EQ(assembly.add(piece(1, 4)).error().code, ErrorCode::kMalformed);        // another count
  auto whole = assembly.add(piece(1, 3));
  ASSERT_TRUE(whole.ok() && whole->has_value());
  EXPECT_EQ((*whole)->signs, signs);
  EXPECT_EQ((*whole)->round, 4u);
  EXPECT_EQ((*whole)->loss, 0.5);
  EXPECT_EQ((*whole)->model_digest, digest);
  EXPECT_EQ(assembly.bytes(), encode(piece(0, 3)).size() + encode(piece(1, 3)).size() + encode(piece(2, 3)).size());

  // A last word with a padding bit set is no vote.
  VoteAssembly padded;
  auto last = piece(0, 1);
  last.words.back() |= std::uint64_t{1} << 63;
  EXPECT_EQ(padded.add(last).error().code, ErrorCode::kMalformed);
}

TEST(Messages, RelayedPiecesCarryTheServersEnvelopeAndRequestsAreControl) {
  auto key = transport::SigningKey::generate().value();
  const auto verify_key = key.verify_key();
  transport::Signer server(std::move(key), 7, 0, transport::Role::kServer);
  const auto piece = encode(DecisionPiece{4, 0, 2, 64, std::vector<std::uint8_t>(32, 1)});
  const auto envelope = server.envelope_for(transport::MessageType::kDecisionPiece, 4, piece);
  auto relayed = decode_relayed_piece(encode(RelayedPiece{envelope, piece}));
  ASSERT_TRUE(relayed.ok()) << relayed.error().to_string();
  EXPECT_EQ(relayed->envelope.header.sender, 0u);
  EXPECT_EQ(relayed->envelope.header.payload_digest, envelope.header.payload_digest);
  EXPECT_EQ(relayed->piece, piece);
  EXPECT_TRUE(transport::verify_envelope_signature(relayed->envelope, verify_key));
  EXPECT_FALSE(decode_relayed_piece(std::vector<std::uint8_t>(100, 0)).ok());  // shorter than an envelope
  auto request = decode_control(encode(DecisionRequest{41}));
  ASSERT_TRUE(request.ok());
  ASSERT_TRUE(std::holds_alternative<DecisionRequest>(*request));
  EXPECT_EQ(std::get<DecisionRequest>(*request).round, 41u);
  auto trailing = encode(DecisionRequest{41});
  trailing.push_back(0);
  EXPECT_FALSE(decode_control(trailing).ok());
}

// A run's frame limits are the transport's defaults for a small model, and for a large one exactly
// its largest payload of each type (the heads measured on encoded messages): fp32 votes of
// d = 25.6 M (102 MB) and sign votes of d = 2^30 with audited envelopes fit, and nothing bigger.
TEST(Messages, FrameLimitsFollowTheModel) {
  using transport::MessageType;
  const transport::FrameLimits defaults;
  const auto small = round_frame_limits(1000, 4000, false, 8);
  EXPECT_EQ(small.max_payload, defaults.max_payload);
  EXPECT_EQ(round_frame_limits(1000, 0, true, 8).max_payload, defaults.max_payload);

  const std::size_t d = 25'600'000;
  const auto fp32 = round_frame_limits(d, 4 * d, false, 8);
  const std::size_t vote_head = encode(EncodedVote{1, 0.5, {}, std::vector<std::uint8_t>(10)}).size() - 10;
  EXPECT_EQ(fp32.limit(MessageType::kVote), vote_head + 4 * d);
  EXPECT_EQ(fp32.limit(MessageType::kDecision), decision_bytes(d, false));
  const std::size_t piece_head = encode(DecisionPiece{1, 0, 1, 10, std::vector<std::uint8_t>(10)}).size() - 10;
  EXPECT_EQ(fp32.limit(MessageType::kDecisionPiece),
            transport::kEnvelopeMetaSize + piece_head + decision_bytes(d, false));
  EXPECT_EQ(fp32.limit(MessageType::kPartitionSigns), defaults.limit(MessageType::kPartitionSigns));
  EXPECT_EQ(fp32.limit(MessageType::kVotePiece), defaults.limit(MessageType::kVotePiece));
  EXPECT_EQ(fp32.limit(MessageType::kStateTransfer), defaults.limit(MessageType::kStateTransfer));
  EXPECT_EQ(fp32.limit(MessageType::kControl), defaults.limit(MessageType::kControl));

  const std::size_t huge = std::size_t{1} << 30;
  const auto signs = round_frame_limits(huge, 0, true, 5);
  const std::size_t signs_head = encode(Vote{1, 0.5, {}, BitVector(64)}).size() - 8;
  const std::size_t audited_extra = encode(audited(64)).size() - encode(audited(64).vote).size() -
                                    audited(64).inputs.size() * transport::kEnvelopeMetaSize;
  EXPECT_EQ(signs.limit(MessageType::kPartitionSigns), signs_head + huge / 8);
  EXPECT_EQ(signs.limit(MessageType::kVotePiece),
            encode(VotePiece{1, 0.5, {}, 64, 0, 1, {0}}).size() - 8 + huge / 8);  // one piece, every word
  EXPECT_EQ(signs.limit(MessageType::kVote), signs_head + huge / 8 + audited_extra + 5 * transport::kEnvelopeMetaSize);
  EXPECT_EQ(signs.limit(MessageType::kDecision), decision_bytes(huge, true));
}

// The server cuts a decision, the pieces arrive in any order (repeats included), and the node
// puts the same bytes together; a piece of another cut changes nothing.
TEST(Messages, CutDecisionsAreAssembledInAnyOrder) {
  std::vector<std::uint8_t> payload(1001);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::uint8_t>(i * 7 + 3);
  for (std::uint32_t count : {1u, 2u, 7u, 15u}) {
    const auto pieces = cut_decision(9, payload, count);
    ASSERT_EQ(pieces.size(), count);
    for (const auto& piece : pieces) {
      auto decoded = decode_decision_piece(encode(piece), payload.size(), count);
      ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
    }
    DecisionAssembly assembly;
    std::optional<std::vector<std::uint8_t>> whole;
    for (std::uint32_t k = count; k-- > 0;) {  // last piece first
      EXPECT_FALSE(whole.has_value());
      whole = assembly.add(pieces[k]);
      if (k > 0 && k + 1 < count) {
        EXPECT_FALSE(assembly.add(pieces[k + 1]).has_value());  // a repeat
      }
      if (count > 1 && k == count - 1) {
        EXPECT_FALSE(assembly.add(cut_decision(9, payload, count + 1)[0]).has_value());  // another cut
      }
    }
    ASSERT_TRUE(whole.has_value()) << count;
    EXPECT_EQ(*whole, payload);
    EXPECT_TRUE(assembly.empty());
  }
}

}  // namespace ballot::runtime

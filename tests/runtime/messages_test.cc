#include "runtime/messages.h"

#include <gtest/gtest.h>

namespace ballot::runtime {
namespace {

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

  Decision decision{9, pattern(64)};
  auto decoded_decision = decode_decision(encode(decision), 64);
  ASSERT_TRUE(decoded_decision.ok());
  EXPECT_EQ(decoded_decision->signs, decision.signs);

  auto join = decode_control(encode(Join{5}));
  ASSERT_TRUE(join.ok());
  EXPECT_EQ(std::get<Join>(*join).round, 5u);
  auto finish = decode_control(encode(Finish{11}));
  ASSERT_TRUE(finish.ok());
  EXPECT_EQ(std::get<Finish>(*finish).rounds, 11u);
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

TEST(Messages, PaddingBitsAndUnknownTagsAreMalformed) {
  auto decision = encode(Decision{1, pattern(65)});
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

  FloatDecision decision{4, {1.0f, -2.5f, 0.0f}};
  auto decoded_decision = decode_float_decision(encode(decision), 3);
  ASSERT_TRUE(decoded_decision.ok());
  EXPECT_EQ(decoded_decision->direction, decision.direction);
  EXPECT_FALSE(decode_float_decision(encode(decision), 4).ok());
}

}  // namespace
}  // namespace ballot::runtime

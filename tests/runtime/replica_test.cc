#include "runtime/replica.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>

#include "coding/codec_registry.h"
#include "coding/election_encoder.h"
#include "core/byte_io.h"
#include "kernels/sign_kernels.h"
#include "runtime/messages.h"
#include "runtime/node_worker.h"
#include "runtime/replica.h"
#include "runtime_test_util.h"

namespace ballot::runtime {
namespace {

using testing::set_up;
using testing::tiny_run;

TEST(Replica, CheckpointRoundTripAndValidation) {
  auto setup = set_up(tiny_run());
  auto replica = Replica::create(setup).value();
  replica.apply(0, BitVector(replica.dimension(), true));
  Checkpoint checkpoint;
  replica.save_to(checkpoint);
  auto other = Replica::create(setup).value();
  EXPECT_NE(other.digest(), replica.digest());
  ASSERT_TRUE(other.restore_from(checkpoint).ok());
  EXPECT_EQ(other.digest(), replica.digest());

  checkpoint.sections["model"].pop_back();
  EXPECT_EQ(other.restore_from(checkpoint).error().code, ErrorCode::kMalformed);
  checkpoint.sections.erase("optimizer");
  EXPECT_FALSE(other.restore_from(checkpoint).ok());
}

// The vote observer sees every vote decision the replica applies, as it was applied; a state
// restore and the gradient path's decisions pass it by.
TEST(Replica, TheVoteObserverSeesEachAppliedVote) {
  auto options = tiny_run();
  options.digest_every = 2;
  auto setup = set_up(options);
  auto replica = Replica::create(setup).value();
  const std::size_t d = replica.dimension();
  struct Seen {
    std::uint64_t round;
    BitVector vote;
    learning::StepScale scale;
    bool full;
  };
  std::vector<Seen> seen;
  replica.set_vote_observer([&](std::uint64_t round, const BitVector& vote, learning::StepScale scale, bool full) {
    seen.push_back({round, vote, scale, full});
  });
  Checkpoint start;
  replica.save_to(start);
  BitVector vote(d);
  for (std::size_t i = 0; i < d; i += 3) vote.set(i, true);
  replica.apply(0, vote);
  replica.apply(1, vote, learning::StepScale{0.25f, 0.5f}, false);
  replica.apply(2, std::vector<float>(d, 1.0f));
  ASSERT_TRUE(replica.restore_from(start).ok());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].round, 0u);
  EXPECT_EQ(seen[0].vote, vote);
  EXPECT_EQ(seen[0].scale, replica.scale(0));
  EXPECT_FALSE(seen[0].full);  // round 1 is not a multiple of 2
  EXPECT_EQ(seen[1].round, 1u);
  EXPECT_EQ(seen[1].scale, (learning::StepScale{0.25f, 0.5f}));
  EXPECT_FALSE(seen[1].full);
  replica.set_vote_observer({});
  replica.apply(0, vote);
  EXPECT_EQ(seen.size(), 2u);
}

transport::Digest parameters_digest(Replica& replica) {
  const auto params = replica.model().parameters();
  return transport::payload_digest({reinterpret_cast<const std::uint8_t*>(params.data()), params.size_bytes()});
}

TEST(Replica, TheStateDigestIsTheParametersEveryKRoundsAndAChainInBetween) {
  auto options = tiny_run();
  options.digest_every = 3;
  auto setup = set_up(options);
  auto a = Replica::create(setup).value();
  auto b = Replica::create(setup).value();
  EXPECT_EQ(a.state_digest(), parameters_digest(a));  // round 0 is a multiple
  BitVector up(a.dimension(), true), down(a.dimension(), false);
  std::vector<transport::Digest> seen{a.state_digest()};
  for (std::uint64_t r = 0; r < 7; ++r) {
    const BitVector& decision = r % 2 == 0 ? up : down;
    a.apply(r, decision, a.scale(r), a.full_digest_after(r));
    b.apply(r, decision, b.scale(r), b.full_digest_after(r));
    EXPECT_EQ(a.state_digest(), b.state_digest()) << r;
    if ((r + 1) % 3 == 0) {
      EXPECT_EQ(a.state_digest(), parameters_digest(a)) << r;
    } else {
      EXPECT_NE(a.state_digest(), parameters_digest(a)) << r;
    }
    for (const auto& earlier : seen) EXPECT_NE(a.state_digest(), earlier) << r;
    seen.push_back(a.state_digest());
  }
  // The chain binds the decision and both scale values: another of either gives another digest.
  auto c = Replica::create(setup).value();
  auto d = Replica::create(setup).value();
  auto e = Replica::create(setup).value();
  c.apply(0, up, learning::StepScale{0.001f, 0.0f}, false);
  d.apply(0, up, learning::StepScale{0.001f, 1e-4f}, false);
  e.apply(0, down, learning::StepScale{0.001f, 0.0f}, false);
  EXPECT_NE(c.state_digest(), d.state_digest());
  EXPECT_NE(c.state_digest(), e.state_digest());
  // A replica whose update diverged after the anchor (here: a parameter moved by hand, as an
  // update that is not bit-exact would) agrees on the chain only until the next multiple of
  // digest_every, where the parameters' digest tells them apart.
  auto f = Replica::create(setup).value();
  auto g = Replica::create(setup).value();
  f.apply(0, up, f.scale(0), f.full_digest_after(0));
  g.apply(0, up, g.scale(0), g.full_digest_after(0));
  g.model().parameters()[0] += 1.0f;
  f.apply(1, up, f.scale(1), f.full_digest_after(1));
  g.apply(1, up, g.scale(1), g.full_digest_after(1));
  EXPECT_EQ(f.state_digest(), g.state_digest());  // round 2: still the chain
  f.apply(2, up, f.scale(2), f.full_digest_after(2));
  g.apply(2, up, g.scale(2), g.full_digest_after(2));
  EXPECT_NE(f.state_digest(), g.state_digest());  // round 3: the parameters
}

// On the gradient path the chain takes direction_digest(direction): the digest of the direction's
// body on the wire, its entries when it is sparse. A full-digest round takes the parameters.
TEST(Replica, TheChainTakesTheDirectionsDigest) {
  auto setup = set_up(tiny_run());
  auto a = Replica::create(setup).value();
  std::vector<float> direction(a.dimension(), 0.0f);
  direction[1] = 0.5f;
  direction[7] = -0.0f;
  const transport::Digest before = a.state_digest();
  const learning::StepScale scale{0.01f, 1e-4f};
  a.apply(0, std::span<const float>(direction), scale, false);
  ByteWriter chain;
  const std::string_view label = "ballot.state.v1";
  chain.put_bytes({reinterpret_cast<const std::uint8_t*>(label.data()), label.size()});
  chain.put_bytes(before);
  chain.put<std::uint64_t>(0);
  chain.put<std::uint32_t>(std::bit_cast<std::uint32_t>(scale.lr));
  chain.put<std::uint32_t>(std::bit_cast<std::uint32_t>(scale.weight_decay));
  chain.put_bytes(direction_digest(direction));
  EXPECT_EQ(a.state_digest(), transport::sha256(chain.bytes()));
  // −0 is an entry: the same direction with +0 there chains to another digest.
  auto b = Replica::create(setup).value();
  direction[7] = 0.0f;
  b.apply(0, std::span<const float>(direction), scale, false);
  EXPECT_NE(b.state_digest(), a.state_digest());
  EXPECT_EQ(b.digest(), a.digest());  // the parameters moved the same (−0 and +0 step alike)
  b.apply(1, std::span<const float>(direction), scale, true);
  EXPECT_EQ(b.state_digest(), parameters_digest(b));

  // A decision as it travels gives the same replica, its digest read off the bytes; the caller
  // that asks gets the direction, and a sparse one's list.
  auto c = Replica::create(setup).value();
  direction[7] = -0.0f;
  const auto sparse = encode(FloatDecision{0, scale, false, direction});
  Replica::AppliedDirection applied;
  ASSERT_TRUE(c.apply_decision(0, sparse, false, &applied).ok());
  EXPECT_EQ(c.state_digest(), a.state_digest());
  EXPECT_EQ(c.digest(), a.digest());
  ASSERT_EQ(applied.direction.size(), direction.size());
  EXPECT_EQ(std::memcmp(applied.direction.data(), direction.data(), 4 * direction.size()), 0);  // −0 too
  ASSERT_TRUE(applied.listed.has_value());
  EXPECT_EQ(applied.listed->indices, (std::vector<std::uint64_t>{1, 7}));
  EXPECT_EQ(applied.listed->values[0], 0.5f);
  EXPECT_TRUE(std::signbit(applied.listed->values[1]));
  // The next decision reuses the direction's memory, and a dense one lists nothing.
  const float* memory = applied.direction.data();
  const std::vector<float> everywhere(c.dimension(), 0.125f);
  ASSERT_TRUE(c.apply_decision(1, encode(FloatDecision{1, scale, false, everywhere}), false, &applied).ok());
  EXPECT_EQ(applied.direction.data(), memory);
  EXPECT_EQ(applied.direction, everywhere);
  EXPECT_FALSE(applied.listed.has_value());
  a.apply(1, std::span<const float>(everywhere), scale, false);
  EXPECT_EQ(c.state_digest(), a.state_digest());

  // A decision of another round, or cut short, changes nothing and leaves no entries to read; the
  // memory stays for the next one when the bytes decoded.
  const auto digest = c.digest();
  const auto state = c.state_digest();
  EXPECT_FALSE(c.apply_decision(2, sparse, false, &applied).ok());
  EXPECT_FALSE(applied.listed.has_value());
  EXPECT_EQ(applied.direction.data(), memory);
  auto cut = encode(FloatDecision{2, scale, false, direction});
  cut.pop_back();
  applied.listed = coding::SparseGradient{};
  EXPECT_FALSE(c.apply_decision(2, cut, false, &applied).ok());
  EXPECT_FALSE(applied.listed.has_value());
  EXPECT_EQ(c.digest(), digest);
  EXPECT_EQ(c.state_digest(), state);
  // A full-digest round takes the parameters, whatever the direction's bytes.
  ASSERT_TRUE(c.apply_decision(2, encode(FloatDecision{2, scale, true, direction}), false, &applied).ok());
  EXPECT_EQ(c.state_digest(), parameters_digest(c));
}

TEST(Replica, TheDecisionsScaleIsWhatMovesTheParameters) {
  auto setup = set_up(tiny_run());
  auto own = Replica::create(setup).value();
  auto sent = Replica::create(setup).value();
  const BitVector up(own.dimension(), true);
  const learning::StepScale scale = own.scale(0);
  EXPECT_EQ(scale.lr, static_cast<float>(setup.schedule.at(0)));
  own.apply(0, up);
  sent.apply(0, up, scale, own.full_digest_after(0));
  EXPECT_EQ(own.digest(), sent.digest());  // the same bits as the schedule's
  auto other = Replica::create(setup).value();
  other.apply(0, up, learning::StepScale{2 * scale.lr, scale.weight_decay}, false);
  EXPECT_NE(other.digest(), own.digest());
}

TEST(Replica, CheckpointsCarryTheStateDigest) {
  auto options = tiny_run();
  options.digest_every = 100;
  auto setup = set_up(options);
  auto replica = Replica::create(setup).value();
  replica.apply(0, BitVector(replica.dimension(), true));
  Checkpoint checkpoint;
  replica.save_to(checkpoint);
  auto other = Replica::create(setup).value();
  ASSERT_TRUE(other.restore_from(checkpoint).ok());
  EXPECT_EQ(other.state_digest(), replica.state_digest());
  // A checkpoint written before state digests anchors at its parameters.
  checkpoint.sections.erase("state_digest");
  auto older = Replica::create(setup).value();
  ASSERT_TRUE(older.restore_from(checkpoint).ok());
  EXPECT_EQ(older.state_digest(), parameters_digest(older));
  EXPECT_EQ(older.digest(), replica.digest());
  checkpoint.sections["state_digest"] = {1, 2, 3};
  const auto before = older.state_digest();
  EXPECT_EQ(older.restore_from(checkpoint).error().code, ErrorCode::kMalformed);
  EXPECT_EQ(older.state_digest(), before);  // unchanged on error
}

TEST(Decide, MajorityWithTiesToPlusOneAndEmptyIsPlusOne) {
  BitVector plus(70, true), minus(70, false);
  std::vector<const BitVector*> votes{&plus, &minus};
  EXPECT_EQ(decide(votes, 70).count_ones(), 70u);
  votes.push_back(&minus);
  EXPECT_EQ(decide(votes, 70).count_ones(), 0u);
  EXPECT_EQ(decide({}, 70).count_ones(), 70u);
}

}  // namespace
}  // namespace ballot::runtime

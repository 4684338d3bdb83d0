#include "runtime/training.h"

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
#include "runtime_test_util.h"

namespace ballot::runtime {
namespace {

TrainingOptions small() {
  TrainingOptions options;
  options.nodes = 5;
  options.byzantine = 1;
  options.model = "mlp:hidden=8";
  options.data = "synthetic:examples=500,features=12,classes=3";
  options.worker_momentum = 0;
  options.partition_size = 8;
  return options;
}

TrainingSetup make(const TrainingOptions& options) { return testing::setup_for(options).value(); }

TEST(TrainingOptions, ValidateNamesTheOption) {
  auto options = small();
  EXPECT_TRUE(options.validate().ok());
  options.byzantine = 3;
  EXPECT_NE(options.validate().error().message.find("b < n/2"), std::string::npos);
  options = small();
  options.lr = "linear:lr=1";
  EXPECT_FALSE(options.validate().ok());
  options = small();
  options.code = "deterministic:b=x";
  EXPECT_FALSE(make_training_setup(
                   options, std::make_shared<const learning::TrainTestSplit>(load_training_data(options).value()))
                   .ok());
  options = small();
  options.data = "imagenet";
  EXPECT_NE(load_training_data(options).error().message.find("unknown dataset"), std::string::npos);
  options = small();
  options.placement = Placement::kExchange;
  EXPECT_TRUE(options.validate().ok());
  options.rule = "median";  // the gradient path has no election code to relay through
  EXPECT_NE(options.validate().error().message.find("placement 'exchange'"), std::string::npos);
  // A codec only travels on the gradient path: with the vote it would be silently unused.
  options = small();
  options.codec = "qsgd:s=16";
  EXPECT_NE(options.validate().error().message.find("applies to the gradient path only"), std::string::npos);
  options.rule = "median";
  EXPECT_TRUE(options.validate().ok());
  options.codec = "qsgd:bogus=1";
  EXPECT_FALSE(options.validate().ok());
  // DGC corrects momentum at the node: a server rule with momentum would apply it twice.
  options.codec = "dgc:ratio=0.01";
  options.update = "sgd";
  EXPECT_TRUE(options.validate().ok());
  for (const char* update : {"sgd:momentum=0.9", "heavyball", "signum"}) {
    options.update = update;
    const auto status = options.validate();
    ASSERT_FALSE(status.ok()) << update;
    EXPECT_NE(status.error().message.find("momentum a second time"), std::string::npos) << update;
  }
  options.update = "heavyball:momentum=0";
  EXPECT_TRUE(options.validate().ok());
  options.update = "sgd:momentum=0.9";  // DGC without momentum correction: the server's is fine
  options.codec = "dgc:ratio=0.01,momentum=0";
  EXPECT_TRUE(options.validate().ok());
}

TEST(TrainingSetup, DeterministicCodeTakesTheFaultBudget) {
  auto setup = make(small());
  EXPECT_EQ(setup.code, coding::AllocationMatrix::deterministic(5, 1).value());
  auto options = small();
  options.attack = "reverse";
  options.attackers = 2;
  EXPECT_EQ(make(options).byzantine.size(), 2u);
}

// A node's vote is the majority over its partitions of the signs of their gradients.
// The transport limits of a run follow its model: the defaults for a small one; for 17 M
// parameters on the fp32 gradient path (68 MB votes, over the 64 MiB default) exactly its vote
// and decision, and on the vote path the defaults again (2.1 MB of signs).
TEST(TrainingSetup, FrameLimitsFollowTheModelAndCodec) {
  using transport::MessageType;
  const transport::FrameLimits defaults;
  EXPECT_EQ(frame_limits(make(small())).value().max_payload, defaults.max_payload);
  auto options = small();
  options.model = "synthetic:d=17000000";
  options.rule = "mean";
  options.codec = "fp32";
  const auto fp32 = frame_limits(make(options));
  ASSERT_TRUE(fp32.ok()) << fp32.error().to_string();
  const std::size_t d = 17'000'000;
  const std::size_t wire = coding::make_codec("fp32").value()->wire_size(d);  // 4d and the codec's header
  EXPECT_EQ(fp32->limit(MessageType::kVote), round_frame_limits(d, wire, false, 5).limit(MessageType::kVote));
  EXPECT_GT(fp32->limit(MessageType::kVote), 4 * d);
  EXPECT_EQ(fp32->limit(MessageType::kDecision), decision_bytes(d, false));
  options.rule = "vote";
  options.codec = "fp32";
  EXPECT_EQ(frame_limits(make(options)).value().max_payload, defaults.max_payload);
}

TEST(NodeWorker, VoteIsTheElectionOfItsPartitionSigns) {
  auto setup = make(small());
  auto replica = Replica::create(setup).value();
  const std::size_t d = replica.dimension();
  for (std::size_t node = 0; node < setup.options.nodes; ++node) {
    NodeWorker worker(setup, node);
    BitVector vote;
    worker.vote(replica, 3, vote);
    std::vector<BitVector> signs(setup.options.nodes, BitVector(d));
    for (std::uint32_t j = 0; j < setup.options.nodes; ++j) {
      learning::Batch batch = learning::gather(setup.data->train, setup.sampler.indices(3, j));
      replica.model().forward_backward(batch.features, batch.labels);
      signs[j] = kernels::pack_signs(replica.model().gradients());
    }
    BitVector expected;
    coding::encode_replicated(setup.code, node, signs, expected);
    EXPECT_EQ(vote, expected) << "node " << node;
  }
}

// A driver that runs the worker momentum and the packing elsewhere (on a GPU) hands the node its
// signs and, for the state file, its momentum: the vote and the saved state are fold's.
// A run with worker momentum 0.9, as the drivers that fold elsewhere have.
TrainingSetup with_momentum() {
  auto options = small();
  options.worker_momentum = 0.9;
  return make(options);
}

TEST(NodeWorker, SignsAndMomentumFromElsewhereGiveFoldsVoteAndState) {
  auto setup = with_momentum();
  auto replica = Replica::create(setup).value();
  const std::size_t d = replica.dimension();
  const std::uint32_t node = 1;
  NodeWorker folding(setup, node), handed(setup, node);
  std::map<std::uint32_t, learning::WorkerMomentum> elsewhere;
  for (std::uint64_t round = 0; round < 3; ++round) {
    for (const std::uint32_t j : folding.partitions()) {
      learning::Batch batch = learning::gather(setup.data->train, setup.sampler.indices(round, j));
      replica.model().forward_backward(batch.features, batch.labels);
      const auto gradient = replica.model().gradients();
      ASSERT_TRUE(folding.fold(j, gradient).ok());
      BitVector signs;
      elsewhere.try_emplace(j, setup.options.worker_momentum).first->second.update(gradient, signs);
      ASSERT_TRUE(handed.fold_signs(j, d, signs.words()).ok());
    }
    BitVector a, b;
    folding.folded_vote(d, a);
    handed.folded_vote(d, b);
    EXPECT_EQ(a, b) << "round " << round;
  }
  for (const std::uint32_t j : folding.partitions()) {
    ASSERT_NE(handed.momentum(j), nullptr);
    EXPECT_TRUE(handed.momentum(j)->momentum().empty());  // never folded here
    ASSERT_TRUE(handed.set_momentum(j, elsewhere.at(j).momentum(), d).ok());
    ASSERT_NE(folding.momentum(j), nullptr);
    EXPECT_TRUE(std::ranges::equal(folding.momentum(j)->momentum(), handed.momentum(j)->momentum()));
  }
  EXPECT_EQ(handed.save_state(), folding.save_state());

  // Refused: a partition of another row, signs of another size or with padding bits set, a
  // momentum of another size or of a partition this node does not keep.
  std::uint32_t other = 0;
  while (std::ranges::find(folding.partitions(), other) != folding.partitions().end()) ++other;
  const BitVector ones(d, true);
  const auto words = ones.words();
  EXPECT_EQ(handed.fold_signs(other, d, words).error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(handed.fold_signs(folding.partitions()[0], d + 64, words).ok());
  std::vector<std::uint64_t> padded(words.begin(), words.end());
  if (d % 64 != 0) {
    padded.back() = ~std::uint64_t{0};
    EXPECT_EQ(handed.fold_signs(folding.partitions()[0], d, padded).error().code, ErrorCode::kMalformed);
  }
  const std::vector<float> short_momentum(d - 1, 0.0f);
  EXPECT_EQ(handed.set_momentum(folding.partitions()[0], short_momentum, d).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(handed.momentum(other), nullptr);
  EXPECT_FALSE(handed.set_momentum(other, std::vector<float>(d), d).ok());
  // Without worker momentum there is none to hand back.
  auto plain = make(small());
  EXPECT_EQ(NodeWorker(plain, node).momentum(folding.partitions()[0]), nullptr);
}

// A driver packing pieces of the signs itself (a vote in pieces on a GPU) hands them over word
// range by word range: the vote is the whole signs' vote.
TEST(NodeWorker, SignsInPiecesFromElsewhereGiveTheSameVote) {
  auto setup = with_momentum();
  auto replica = Replica::create(setup).value();
  const std::size_t words = BitVector::words_for(replica.dimension());
  const std::size_t d = replica.dimension();
  ASSERT_GE(words, 3u);
  const std::uint32_t node = 1;
  NodeWorker folding(setup, node), pieces(setup, node);
  for (const std::uint32_t j : folding.partitions()) {
    learning::Batch batch = learning::gather(setup.data->train, setup.sampler.indices(0, j));
    replica.model().forward_backward(batch.features, batch.labels);
    ASSERT_TRUE(folding.fold(j, replica.model().gradients()).ok());
    const auto signs = folding.folded_signs(j).words();
    // The last piece first: the order of the pieces does not matter.
    const std::size_t cut = words / 3, cut2 = 2 * words / 3;
    ASSERT_TRUE(pieces.fold_signs_range(j, d, cut2, signs.subspan(cut2)).ok());
    ASSERT_TRUE(pieces.fold_signs_range(j, d, 0, signs.subspan(0, cut)).ok());
    ASSERT_TRUE(pieces.fold_signs_range(j, d, cut, signs.subspan(cut, cut2 - cut)).ok());
    EXPECT_EQ(pieces.folded_signs(j), folding.folded_signs(j));
  }
  BitVector a, b;
  folding.folded_vote(d, a);
  pieces.folded_vote(d, b);
  EXPECT_EQ(a, b);

  // Refused: another row's partition, words past the end, padding bits set in the last word.
  std::uint32_t other = 0;
  while (std::ranges::find(folding.partitions(), other) != folding.partitions().end()) ++other;
  const std::vector<std::uint64_t> two(2, 0);
  EXPECT_EQ(pieces.fold_signs_range(other, d, 0, two).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(pieces.fold_signs_range(folding.partitions()[0], d, words - 1, two).error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_FALSE(pieces.fold_signs_range(folding.partitions()[0], d, words + 1, {}).ok());
  if (d % 64 != 0) {
    const std::vector<std::uint64_t> padded(1, ~std::uint64_t{0});
    EXPECT_EQ(pieces.fold_signs_range(folding.partitions()[0], d, words - 1, padded).error().code,
              ErrorCode::kInvalidArgument);
  }
}

// Exchange placement: a node computes (and keeps the momentum of) its own partition only.
TEST(NodeWorker, ExchangePlacementComputesOnlyTheOwnPartition) {
  auto options = small();
  auto replicated = make(options);
  options.placement = Placement::kExchange;
  auto exchange = make(options);
  for (std::size_t node = 0; node < options.nodes; ++node) {
    EXPECT_EQ(NodeWorker(exchange, node).partitions(), std::vector<std::uint32_t>{static_cast<std::uint32_t>(node)});
    EXPECT_EQ(NodeWorker(replicated, node).partitions(), replicated.code.row(node));
  }
}

TEST(Replica, CheckpointRoundTripAndValidation) {
  auto setup = make(small());
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
  auto options = small();
  options.digest_every = 2;
  auto setup = make(options);
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
  auto options = small();
  options.digest_every = 3;
  auto setup = make(options);
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
  auto setup = make(small());
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
  auto setup = make(small());
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
  auto options = small();
  options.digest_every = 100;
  auto setup = make(options);
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

TEST(TrainingOptions, DigestEveryMustBePositive) {
  auto options = small();
  options.digest_every = 0;
  EXPECT_NE(options.validate().error().message.find("digest_every"), std::string::npos);
}

TEST(Decide, MajorityWithTiesToPlusOneAndEmptyIsPlusOne) {
  BitVector plus(70, true), minus(70, false);
  std::vector<const BitVector*> votes{&plus, &minus};
  EXPECT_EQ(decide(votes, 70).count_ones(), 70u);
  votes.push_back(&minus);
  EXPECT_EQ(decide(votes, 70).count_ones(), 0u);
  EXPECT_EQ(decide({}, 70).count_ones(), 70u);
}

TEST(Placements, TheTableParsesAndNamesEveryPlacement) {
  const auto table = placement_table();
  ASSERT_EQ(table.size(), 2u);
  for (const auto& entry : table) {
    EXPECT_EQ(parse_placement(entry.name).value(), entry.make);
    EXPECT_EQ(placement_name(entry.make), entry.name);
    EXPECT_EQ(parse_placement(entry.example).value(), entry.make);
    EXPECT_FALSE(entry.summary.empty());
  }
  const auto unknown = parse_placement("everywhere");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(unknown.error().message.find("known: replicated, exchange"), std::string::npos) << unknown.error().message;
}

}  // namespace
}  // namespace ballot::runtime

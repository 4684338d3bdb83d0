#include "runtime/simulator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "runtime/decision_log.h"
#include "runtime/experiment.h"
#include "runtime_test_util.h"

namespace ballot::runtime {
namespace {

using testing::setup_for;

TrainingOptions small_run() { return testing::small_synthetic_run(5, "paper5", 60, 0); }

// node state (the Signum momentum of each partition, the codec's error-feedback memory)
// is saved with the server's checkpoint. A run stopped after round 10 and started again from the
// files ends with the model of an undisturbed run, bit for bit; without the node state files it
// does not (the momentum would restart from zero).
TEST(Simulator, ResumedRunWithNodeStateMatchesAnUndisturbedOne) {
  for (const bool gradient_path : {false, true}) {
    auto options = small_run();
    options.rounds = 20;
    options.attack = "none";
    if (gradient_path) {
      options.code = "identity";
      options.rule = "mean";
      options.codec = "topk:ratio=0.25,ef=1";
      options.update = "sgd";
      options.lr = "constant:lr=0.05";
    }
    auto whole = setup_for(options);
    ASSERT_TRUE(whole.ok()) << whole.error().to_string();
    auto straight = simulate(*whole);
    ASSERT_TRUE(straight.ok()) << straight.error().to_string();

    auto first_half = options;
    first_half.rounds = 10;
    auto half = setup_for(first_half);
    ASSERT_TRUE(half.ok());
    for (const bool node_state : {true, false}) {
      const auto dir = std::filesystem::temp_directory_path() /
                       ("ballot_node_state_" + std::to_string(::getpid()) + (node_state ? "_with" : "_without"));
      std::filesystem::remove_all(dir);
      std::filesystem::create_directories(dir);
      SimulationOptions run;
      run.server.checkpoint_path = dir / "server.ckpt";
      run.server.checkpoint_every = 10;
      if (node_state) {
        run.node.state_dir = dir;
        run.node.state_every = 10;
      }
      ASSERT_TRUE(simulate(*half, run).ok());
      if (node_state) {
        EXPECT_TRUE(std::filesystem::exists(node_state_path(dir, 0)));
      }
      auto resumed = simulate(*whole, run);  // the server resumes from its checkpoint at round 10
      ASSERT_TRUE(resumed.ok()) << resumed.error().to_string();
      EXPECT_EQ(resumed->server.first_round, 10u);
      for (const auto& node : resumed->nodes) {
        ASSERT_TRUE(node.ok());
        EXPECT_EQ(node->states_restored, node_state ? 1u : 0u);
      }
      if (node_state) {
        EXPECT_EQ(resumed->server.model_digest, straight->server.model_digest) << "gradient path " << gradient_path;
      } else {
        EXPECT_NE(resumed->server.model_digest, straight->server.model_digest) << "gradient path " << gradient_path;
      }
      std::filesystem::remove_all(dir);
    }
  }
}

// A server that died between checkpoints resumes where it was: its checkpoint, then the decisions
// its log holds after it. Without worker momentum or error feedback the nodes keep no state of
// their own, so the resumed run ends with the model of an undisturbed one, bit for bit, in both
// paths.
TEST(Simulator, ServerResumesFromItsCheckpointAndItsDecisionLog) {
  for (const bool gradient_path : {false, true}) {
    SCOPED_TRACE(gradient_path ? "gradient path" : "vote path");
    auto options = small_run();
    options.rounds = 20;
    options.attack = "none";
    options.worker_momentum = 0.0;
    if (gradient_path) {
      options.code = "identity";
      options.rule = "mean";
      options.codec = "fp32";
      options.update = "sgd";
      options.lr = "constant:lr=0.05";
    }
    auto setup = setup_for(options);
    ASSERT_TRUE(setup.ok()) << setup.error().to_string();
    auto straight = simulate(*setup);
    ASSERT_TRUE(straight.ok()) << straight.error().to_string();

    const auto dir = std::filesystem::temp_directory_path() / ("ballot_decision_log_" + std::to_string(::getpid()));
    const auto saved = dir / "saved";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(saved);
    // The files as a server killed in round 13 leaves them: the checkpoint of round 10 and the
    // decisions of rounds 10–12 (round 13's is logged after its report).
    SimulationOptions run;
    run.server.checkpoint_path = dir / "server.ckpt";
    run.server.checkpoint_every = 10;
    run.server.on_round = [&](const RoundReport& report) {
      if (report.round != 13) return;
      for (const auto& file : {run.server.checkpoint_path, decision_log_path(run.server.checkpoint_path)}) {
        std::filesystem::copy_file(file, saved / file.filename(), std::filesystem::copy_options::overwrite_existing);
      }
    };
    ASSERT_TRUE(simulate(*setup, run).ok());
    auto logged = read_decision_log(saved / "server.ckpt.decisions");
    ASSERT_TRUE(logged.ok()) << logged.error().to_string();
    EXPECT_EQ(logged->first_round, 10u);
    EXPECT_EQ(logged->decisions.size(), 3u);

    SimulationOptions again;
    again.server.checkpoint_path = saved / "server.ckpt";
    again.server.checkpoint_every = 10;
    auto resumed = simulate(*setup, again);
    ASSERT_TRUE(resumed.ok()) << resumed.error().to_string();
    EXPECT_EQ(resumed->server.first_round, 13u);
    EXPECT_EQ(resumed->server.replayed_decisions, 3u);
    EXPECT_EQ(resumed->server.model_digest, straight->server.model_digest);
    // At its end the log is started afresh after the final checkpoint.
    logged = read_decision_log(saved / "server.ckpt.decisions");
    ASSERT_TRUE(logged.ok());
    EXPECT_EQ(logged->first_round, 20u);
    EXPECT_TRUE(logged->decisions.empty());

    // A torn last record (a write the server never finished): it resumes one round earlier.
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(saved);
    ASSERT_TRUE(simulate(*setup, run).ok());
    const auto log_file = saved / "server.ckpt.decisions";
    std::filesystem::resize_file(log_file, std::filesystem::file_size(log_file) - 1);
    resumed = simulate(*setup, again);
    ASSERT_TRUE(resumed.ok()) << resumed.error().to_string();
    EXPECT_EQ(resumed->server.first_round, 12u);
    EXPECT_EQ(resumed->server.replayed_decisions, 2u);
    EXPECT_EQ(resumed->server.model_digest, straight->server.model_digest);
    std::filesystem::remove_all(dir);
  }
}

// Relayed decisions: the server sends each decision in pieces, one to each counted voter, and the
// voters hand them on under its signature. The run ends with the model of a run without relays,
// bit for bit, in both paths. An omitting node keeps the pieces it should relay: the others then
// ask for the decision whole; where the same votes were counted in each round as without relays
// (a deadline can close a round before a vote that waited for the decision arrives, on a loaded
// machine), the run ends with the same model too. Global top-k's decisions are sparse, smaller
// than the model's largest: their pieces are relayed the same way.
// The server's checkpoint records what makes the run what it is: a checkpoint of another run (here
// another seed, or another code) is refused, naming the difference, and so is one past the run's
// last round. The schedule and the round count may change.
TEST(Simulator, ACheckpointOfAnotherRunIsRefused) {
  auto options = small_run();
  options.rounds = 6;
  const auto dir = std::filesystem::temp_directory_path() / ("ballot_other_run_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  SimulationOptions run;
  run.server.checkpoint_path = dir / "server.ckpt";
  run.server.checkpoint_every = 3;
  ASSERT_TRUE(simulate(setup_for(options).value(), run).ok());

  auto other_seed = options;
  other_seed.seed = options.seed + 1;
  auto refused = simulate(setup_for(other_seed).value(), run);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("is of another run (seed " + std::to_string(options.seed) + " → " +
                                         std::to_string(other_seed.seed) + ")"),
            std::string::npos)
      << refused.error().message;
  auto other_code = options;
  other_code.code = "identity";
  refused = simulate(setup_for(other_code).value(), run);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("(code "), std::string::npos) << refused.error().message;

  auto shorter = options;
  shorter.rounds = 4;
  refused = simulate(setup_for(shorter).value(), run);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("is at round 6, past this run's 4 rounds"), std::string::npos)
      << refused.error().message;

  auto longer = options;
  longer.rounds = 9;
  longer.lr = "constant:lr=0.01";
  auto resumed = simulate(setup_for(longer).value(), run);
  ASSERT_TRUE(resumed.ok()) << resumed.error().to_string();
  EXPECT_EQ(resumed->server.first_round, 6u);
  std::filesystem::remove_all(dir);
}

TEST(Simulator, RelayedDecisionsGiveTheModelOfAnUnrelayedRun) {
  for (const std::string path : {"vote", "fp32", "gtopk:ratio=0.1"}) {
    const bool gradient_path = path != "vote";
    for (const char* attack : {"none", "omission:p=0.5"}) {
      SCOPED_TRACE(path + ", " + attack);
      const bool omission = std::string(attack) != "none";
      auto options = small_run();
      options.rounds = 12;
      options.attack = attack;
      options.attackers = 1;
      if (gradient_path) {
        options.code = "identity";
        options.rule = "trimmed_mean:f=1";
        options.codec = path;
        options.update = "sgd";
        options.lr = "constant:lr=0.05";
      }
      auto setup = setup_for(options);
      ASSERT_TRUE(setup.ok()) << setup.error().to_string();
      // Without omission every round waits for all n votes (the default deadline is never
      // reached); with it, an omitted vote costs a short deadline.
      std::vector<std::vector<std::size_t>> missing_direct, missing_relayed;
      SimulationOptions direct;
      if (omission) direct.server.round_deadline = std::chrono::milliseconds(400);
      direct.server.on_round = [&](const RoundReport& report) { missing_direct.push_back(report.missing); };
      auto sent = simulate(*setup, direct);
      ASSERT_TRUE(sent.ok()) << sent.error().to_string();
      SimulationOptions relayed = direct;
      relayed.server.relay_decisions = true;
      std::vector<std::uint64_t> decision_bytes;
      relayed.server.on_round = [&](const RoundReport& report) {
        missing_relayed.push_back(report.missing);
        // A dense direction is d floats and a head; global top-k's k of d entries take less.
        if (path == "fp32") {
          EXPECT_GT(report.bytes_per_decision, report.fp32_bytes);
        } else if (path.starts_with("gtopk")) {
          EXPECT_LT(report.bytes_per_decision, report.fp32_bytes / 2);
        }
        decision_bytes.push_back(report.bytes_per_decision);
      };
      auto result = simulate(*setup, relayed);
      ASSERT_TRUE(result.ok()) << result.error().to_string();
      EXPECT_EQ(result->server.rounds, 12u);
      EXPECT_EQ(decision_bytes.size(), 12u);
      if (!omission || missing_relayed == missing_direct) {
        EXPECT_EQ(result->server.model_digest, sent->server.model_digest);
      }
      std::uint64_t pieces = 0, requested = 0;
      for (std::size_t i = 0; i < result->nodes.size(); ++i) {
        ASSERT_TRUE(result->nodes[i].ok()) << result->nodes[i].error().to_string();
        EXPECT_EQ(result->nodes[i]->model_digest, result->server.model_digest) << "node " << i;
        if (setup->is_byzantine(i)) continue;
        // Without omission every decision was put together from its pieces and applied, none
        // replaced by a state transfer: the assembled payloads decoded.
        if (!omission) {
          EXPECT_EQ(result->nodes[i]->rounds, 12u) << "node " << i;
          EXPECT_EQ(result->nodes[i]->rejoins, 0u) << "node " << i;
        }
        pieces += result->nodes[i]->pieces_relayed;
        requested += result->nodes[i]->decisions_requested;
      }
      EXPECT_GT(pieces, 12u);
      if (omission) {
        EXPECT_GT(requested, 0u);
      }
      EXPECT_TRUE(result->server.defences.quarantined.empty());
    }
  }
}

// the simulator runs hundreds of nodes (one thread each, real signed envelopes), and
// the lockstep engine gives it the same model.
TEST(Simulator, HundredsOfNodesAgreeWithTheLockstepEngine) {
  TrainingOptions options;
  options.nodes = 201;
  options.byzantine = 20;
  options.code = "identity";
  options.model = "logreg";
  options.data = "synthetic:examples=4000,features=10,classes=3,separation=2";
  options.lr = "constant:lr=0.01";
  options.rounds = 3;
  options.eval_every = 0;
  options.partition_size = 4;
  options.attack = "reverse";
  options.attackers = 20;
  auto setup = setup_for(options);
  ASSERT_TRUE(setup.ok()) << setup.error().to_string();
  auto simulated = simulate(*setup);
  ASSERT_TRUE(simulated.ok()) << simulated.error().to_string();
  EXPECT_EQ(simulated->server.rounds, 3u);
  auto lockstep = run_experiment(*setup);
  ASSERT_TRUE(lockstep.ok()) << lockstep.error().to_string();
  EXPECT_EQ(lockstep->model_digest, simulated->server.model_digest);
}

TEST(Simulator, TrainsAndKeepsEveryReplicaIdentical) {
  auto setup = setup_for(small_run());
  ASSERT_TRUE(setup.ok()) << setup.error().to_string();
  std::vector<RoundReport> reports;
  SimulationOptions options;
  options.server.on_round = [&](const RoundReport& report) { reports.push_back(report); };
  auto result = simulate(*setup, options);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result->server.rounds, 60u);
  EXPECT_GT(result->server.test.accuracy, 0.8);
  ASSERT_EQ(reports.size(), 60u);
  for (const auto& report : reports) {
    EXPECT_EQ(report.votes, 5u);
    EXPECT_TRUE(report.missing.empty());
  }
  for (const auto& node : result->nodes) {
    ASSERT_TRUE(node.ok()) << node.error().to_string();
    EXPECT_EQ(node->rounds, 60u);
    EXPECT_EQ(node->model_digest, result->server.model_digest);
  }
}

TEST(Simulator, SameSeedSameModel) {
  auto options = small_run();
  options.rounds = 10;
  auto a = setup_for(options), b = setup_for(options);
  ASSERT_TRUE(a.ok() && b.ok());
  auto first = simulate(*a), second = simulate(*b);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->server.model_digest, second->server.model_digest);
  options.seed = 2;
  auto c = setup_for(options);
  ASSERT_TRUE(c.ok());
  auto third = simulate(*c);
  ASSERT_TRUE(third.ok());
  EXPECT_NE(first->server.model_digest, third->server.model_digest);
}

// The gradient path: every codec + robust rule pair of the registries runs through the same
// roles. fp32 + mean is plain distributed SGD (the no-defence baseline).
TEST(Simulator, CodecAndRobustRulePairsTrain) {
  const std::pair<const char*, const char*> pairs[] = {{"fp32", "mean"},
                                                       {"qsgd:s=16", "median"},
                                                       {"topk:ratio=0.25,ef=1", "trimmed_mean:f=1"},
                                                       {"gtopk:ratio=0.25", "trimmed_mean:f=1"},
                                                       {"fp16", "nnm:f=1 > krum:f=1"}};
  for (const auto& [codec, rule] : pairs) {
    auto options = small_run();
    options.nodes = 7;
    options.code = "identity";
    options.rule = rule;
    options.codec = codec;
    options.update = "sgd:momentum=0.9";
    options.lr = "constant:lr=0.05";
    options.rounds = 40;
    auto setup = setup_for(options);
    ASSERT_TRUE(setup.ok()) << setup.error().to_string();
    auto result = simulate(*setup);
    ASSERT_TRUE(result.ok()) << codec << " + " << rule << ": " << result.error().to_string();
    EXPECT_GT(result->server.test.accuracy, 0.8) << codec << " + " << rule;
    for (const auto& node : result->nodes) {
      ASSERT_TRUE(node.ok());
      EXPECT_EQ(node->model_digest, result->server.model_digest) << codec << " + " << rule;
    }
  }
}

TEST(Simulator, RuleMustAcceptTheQuorum) {
  auto options = small_run();
  options.rule = "krum:f=1";  // n - b = 4 < 2f + 3 = 5
  auto setup = setup_for(options);
  ASSERT_FALSE(setup.ok());
  EXPECT_EQ(setup.error().code, ErrorCode::kPrecondition);
}

// The deterministic code certifiably tolerates b = 1: with one node sending the reversed vote,
// every round's decision equals the attack-free one, so the final model is bit-identical to the
// model trained without an adversary. Without coding (G = I) the same attacker changes the model.
TEST(Simulator, CertifiedCodeMakesOneReverseAttackerInvisible) {
  auto options = small_run();
  options.rounds = 20;
  auto clean = setup_for(options);
  options.attack = "reverse";
  options.attackers = 1;
  auto attacked = setup_for(options);
  ASSERT_TRUE(clean.ok() && attacked.ok());
  ASSERT_EQ(attacked->byzantine.size(), 1u);
  auto clean_run = simulate(*clean), attacked_run = simulate(*attacked);
  ASSERT_TRUE(clean_run.ok() && attacked_run.ok());
  EXPECT_EQ(clean_run->server.model_digest, attacked_run->server.model_digest);

  options.code = "identity";
  options.attack = "none";
  options.attackers = 0;
  auto plain = setup_for(options);
  options.attack = "reverse";
  options.attackers = 1;
  auto plain_attacked = setup_for(options);
  ASSERT_TRUE(plain.ok() && plain_attacked.ok());
  auto plain_run = simulate(*plain), plain_attacked_run = simulate(*plain_attacked);
  ASSERT_TRUE(plain_run.ok() && plain_attacked_run.ok());
  EXPECT_NE(plain_run->server.model_digest, plain_attacked_run->server.model_digest);
}

// no protocol attack crashes the server or a node, and none costs more than the round
// it hits (the server never waits past the deadline, and stops waiting for a quarantined node).
TEST(Simulator, ProtocolAttacksCostAtMostTheRoundTheyHit) {
  const std::chrono::milliseconds deadline(300);
  for (const char* attack : {"crash", "crash:from=2,until=4", "omission:p=0.5", "delay", "equivocation", "replay",
                             "forged_signature", "malformed", "oversized", "wrong_digest"}) {
    auto options = small_run();
    options.rounds = 8;
    options.attack = attack;
    options.attackers = 1;
    auto setup = setup_for(options);
    ASSERT_TRUE(setup.ok()) << setup.error().to_string();
    const std::size_t attacker = setup->byzantine.at(0);
    SimulationOptions run;
    run.server.round_deadline = deadline;
    std::vector<RoundReport> reports;
    run.server.on_round = [&](const RoundReport& report) { reports.push_back(report); };
    auto quarantine = std::make_shared<Quarantine>();
    run.server.quarantine = quarantine;
    auto result = simulate(*setup, run);
    ASSERT_TRUE(result.ok()) << attack << ": " << result.error().to_string();
    EXPECT_EQ(result->server.rounds, 8u) << attack;
    ASSERT_EQ(reports.size(), 8u);
    for (const auto& report : reports) {
      EXPECT_GE(report.votes, 4u) << attack;
      EXPECT_LT(report.vote_wait_seconds, 0.3 + 1.0) << attack << " round " << report.round;
    }
    for (std::size_t i = 0; i < 5; ++i) {
      ASSERT_TRUE(result->nodes[i].ok()) << attack << " node " << i << ": " << result->nodes[i].error().to_string();
      if (i != attacker) {
        EXPECT_EQ(result->nodes[i]->model_digest, result->server.model_digest) << attack;
      }
    }
    const std::string name = attack;
    if (name == "crash") {
      EXPECT_TRUE(result->nodes[attacker]->crashed);
    }
    if (name == "crash:from=2,until=4") {
      EXPECT_GE(result->nodes[attacker]->rejoins, 1u) << result->nodes[attacker]->rounds;
    }
    if (name == "wrong_digest") {
      // Caught as votes on another model — one state transfer per round, the vote of the round
      // kept — not as equivocation (the node never sends two different votes for a round).
      EXPECT_TRUE(quarantine->proofs().empty());
      EXPECT_GE(reports.front().out_of_sync.size(), 1u);
    }
    if (name == "equivocation") {
      EXPECT_TRUE(quarantine->is_quarantined(node_id(attacker)));
      ASSERT_FALSE(quarantine->proofs().empty());
      EXPECT_EQ(quarantine->proofs().front().first.header.sender, node_id(attacker));
    }
    if (name == "forged_signature" || name == "malformed" || name == "oversized") {
      EXPECT_TRUE(quarantine->is_quarantined(node_id(attacker))) << attack;
      EXPECT_GE(quarantine->events(node_id(attacker)), 3u) << attack;
    }
    if (name == "delay" || name == "replay" || name == "wrong_digest") {
      // Last round's vote, a vote two deadlines late, a vote on another model: what a paused or
      // restarting honest node also sends. Counted as lateness, never a quarantine; what matters
      // is above: no round waited for it past the deadline.
      EXPECT_GE(quarantine->late(node_id(attacker)), 1u) << attack;
      EXPECT_FALSE(quarantine->is_quarantined(node_id(attacker))) << attack;
      EXPECT_EQ(quarantine->events(node_id(attacker)), 0u) << attack;
    }
  }
}

// exchange placement: node j computes only partition j (with its worker momentum) and
// relays its signed signs to column j; node i votes over what it received. Without faults every
// input is what node i would have computed itself, so the model is bit-identical.
TEST(Simulator, ExchangePlacementTrainsTheReplicatedModelBitForBit) {
  auto options = small_run();
  options.rounds = 20;
  auto replicated = setup_for(options);
  options.placement = Placement::kExchange;
  auto exchange = setup_for(options);
  ASSERT_TRUE(replicated.ok() && exchange.ok()) << exchange.error().to_string();
  std::vector<RoundReport> reports;
  SimulationOptions run;
  run.server.on_round = [&](const RoundReport& report) { reports.push_back(report); };
  auto expected = simulate(*replicated);
  auto result = simulate(*exchange, run);
  ASSERT_TRUE(expected.ok() && result.ok()) << result.error().to_string();
  EXPECT_EQ(result->server.model_digest, expected->server.model_digest);
  ASSERT_EQ(reports.size(), 20u);
  for (const auto& report : reports) EXPECT_EQ(report.votes, 5u);
  for (const auto& [node, events] : result->server.defences.misbehaviour) {
    ADD_FAILURE() << "node " << node << ": " << events << " misbehaviour events";
  }
  for (const auto& node : result->nodes) {
    ASSERT_TRUE(node.ok()) << node.error().to_string();
    EXPECT_EQ(node->model_digest, result->server.model_digest);
    EXPECT_EQ(node->inputs_missing, 0u);
    EXPECT_EQ(node->inputs_rejected, 0u);
  }
  EXPECT_TRUE(result->server.defences.quarantined.empty());
}

// A source that crashes: the nodes of its column vote without it (its input abstains) once their
// input deadline passes, and the run completes with the quorum; one that comes back rejoins.
TEST(Simulator, ExchangeReceiversVoteWithoutACrashedSource) {
  for (const char* attack : {"crash", "crash:from=2,until=4"}) {
    auto options = small_run();
    options.rounds = 6;
    options.placement = Placement::kExchange;
    options.attack = attack;
    options.attacker_choice = "0";
    auto setup = setup_for(options);
    ASSERT_TRUE(setup.ok()) << setup.error().to_string();
    SimulationOptions run;
    run.server.round_deadline = std::chrono::milliseconds(200);
    std::vector<RoundReport> reports;
    run.server.on_round = [&](const RoundReport& report) { reports.push_back(report); };
    auto result = simulate(*setup, run);
    ASSERT_TRUE(result.ok()) << attack << ": " << result.error().to_string();
    EXPECT_EQ(result->server.rounds, 6u);
    for (const auto& report : reports) EXPECT_GE(report.votes, 4u) << attack;
    std::uint64_t missing = 0;
    for (std::size_t i = 1; i < 5; ++i) {
      ASSERT_TRUE(result->nodes[i].ok()) << result->nodes[i].error().to_string();
      EXPECT_EQ(result->nodes[i]->model_digest, result->server.model_digest) << attack;
      missing += result->nodes[i]->inputs_missing;
      // Only partition 0 was ever missing, at the nodes of its column.
      if (!setup->code.get(i, 0)) {
        EXPECT_EQ(result->nodes[i]->inputs_missing, 0u) << attack << " node " << i;
      }
    }
    EXPECT_GT(missing, 0u) << attack;
    if (std::string(attack) == "crash") {
      EXPECT_TRUE(result->nodes[0]->crashed);
    } else {
      EXPECT_GE(result->nodes[0]->rejoins, 1u);
    }
  }
}

// The other protocol attacks in exchange placement (they act on the vote, omission also on the
// relayed signs): none stops the run or costs more than the round it hits, and the honest nodes
// stay on the server's model.
TEST(Simulator, ExchangeProtocolAttacksCostAtMostTheRoundTheyHit) {
  for (const char* attack : {"omission:p=0.5", "delay", "replay", "forged_signature", "malformed", "wrong_digest"}) {
    auto options = small_run();
    options.rounds = 5;
    options.placement = Placement::kExchange;
    options.attack = attack;
    options.attackers = 1;
    auto setup = setup_for(options);
    ASSERT_TRUE(setup.ok()) << setup.error().to_string();
    const std::size_t attacker = setup->byzantine.at(0);
    SimulationOptions run;
    run.server.round_deadline = std::chrono::milliseconds(200);
    std::vector<RoundReport> reports;
    run.server.on_round = [&](const RoundReport& report) { reports.push_back(report); };
    auto result = simulate(*setup, run);
    ASSERT_TRUE(result.ok()) << attack << ": " << result.error().to_string();
    ASSERT_EQ(reports.size(), 5u) << attack;
    for (const auto& report : reports) {
      EXPECT_GE(report.votes, 4u) << attack;
      EXPECT_LT(report.vote_wait_seconds, 0.2 + 1.0) << attack << " round " << report.round;
    }
    for (std::size_t i = 0; i < 5; ++i) {
      ASSERT_TRUE(result->nodes[i].ok()) << attack << " node " << i << ": " << result->nodes[i].error().to_string();
      if (i != attacker) {
        EXPECT_EQ(result->nodes[i]->model_digest, result->server.model_digest) << attack;
      }
    }
  }
}

// The equivocation of this placement: the source sends different signed signs to different nodes
// of its column. Each receiver sees one consistent input, but the server sees two votes that
// counted different digests of one author in one round, with the author's signatures: a proof.
TEST(Simulator, ExchangeEquivocatingSourceIsProvenAndQuarantined) {
  auto options = small_run();
  options.rounds = 4;
  options.placement = Placement::kExchange;
  options.attack = "equivocation";
  options.attacker_choice = "0";
  auto setup = setup_for(options);
  ASSERT_TRUE(setup.ok()) << setup.error().to_string();
  ASSERT_GE(setup->code.column_size(0), 3u);  // two honest receivers at least
  SimulationOptions run;
  run.server.round_deadline = std::chrono::milliseconds(300);
  auto quarantine = std::make_shared<Quarantine>();
  run.server.quarantine = quarantine;
  auto result = simulate(*setup, run);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result->server.rounds, 4u);
  EXPECT_TRUE(quarantine->is_quarantined(node_id(0)));
  ASSERT_FALSE(quarantine->proofs().empty());
  const auto proofs = quarantine->proofs();
  const auto& proof = proofs.front();
  EXPECT_EQ(proof.first.header.sender, node_id(0));
  EXPECT_EQ(proof.first.header.type, transport::MessageType::kPartitionSigns);
  EXPECT_NE(proof.first.header.payload_digest, proof.second.header.payload_digest);
  EXPECT_EQ(result->server.defences.quarantined, std::vector<std::size_t>{0});
  EXPECT_GE(result->server.defences.equivocation_proofs, 1u);
  for (std::size_t i = 1; i < 5; ++i) {
    ASSERT_TRUE(result->nodes[i].ok());
    EXPECT_EQ(result->nodes[i]->model_digest, result->server.model_digest);
  }
}

}  // namespace
}  // namespace ballot::runtime

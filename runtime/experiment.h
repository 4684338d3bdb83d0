// The lockstep experiment engine: the server session and n node sessions (runtime/server_session.h,
// runtime/node_session.h) — the same protocol code as the process cluster and the simulator —
// driven round by round on one thread, over the in-memory network with real Ed25519-signed
// envelopes and virtual time (runtime/detail/lockstep_network.h), for security evaluations.
//
// Honest nodes that compute the same partition of the same round on the same model get the same
// signs (the sampler and the worker momentum are functions of (seed, round, partition) and the
// decisions): the engine computes each partition once per round, on the server's replica, and
// hands every honest node's session the message its own worker would have computed. A round
// therefore costs n partition gradients whatever the code's redundancy, against n·r in the
// simulator. With no fault the final model is bit-identical to simulate() and to the process
// cluster for the same options (tested).
//
// Every attack acts where it does in a cluster: at the node session's seam (runtime/node_attacks.h)
// and on the wire. Protocol attacks are real — equivocation is caught by the verifiers and
// quarantined, forged or malformed frames are rejected by the transport, a crashed node's vote is
// absent until it rejoins through a state transfer — in both placements. Deadlines pass in virtual
// time: a round that waits for its deadline costs no wall time, and a delayed vote arrives after
// the server decided.
//
// The engine also computes the attack-free decision of every round (each Byzantine node's vote
// replaced by the honest vote it would have sent) and reports where the applied decision differs.
// Thread-safety: run_experiment is reentrant; several may run at once on different setups.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "learning/model.h"
#include "runtime/roles.h"
#include "runtime/training.h"
#include "transport/crypto.h"

namespace ballot::runtime {

struct ExperimentRound {
  std::uint64_t round = 0;
  double mean_loss = 0.0;     // mean of the counted votes' finite batch losses
  std::size_t votes = 0;      // votes counted (absent: crashed, omitted, rejected attackers)
  bool evaluated = false;     // test evaluation this round (options.eval_every, and the last)
  learning::Evaluation test;  // when evaluated
  // Sign path: coordinates where the applied decision differs from the attack-free one.
  // Gradient path: coordinates whose sign (−, 0 or +) differs between the aggregate and the
  // attack-free one.
  std::size_t changed_coordinates = 0;
  std::uint64_t rejected_messages = 0;  // dropped by the server this round (runtime/server_session.h)
  std::uint64_t decision_bytes = 0;     // payload bytes of the round's decision (RoundReport)
  // Virtual time from the round's start to its decision: 0 when every vote came at once, the
  // deadline (or more) when the server waited for a vote that did not come.
  double seconds = 0.0;
};

struct ExperimentResult {
  std::vector<ExperimentRound> rounds;
  learning::Evaluation test;  // final, on the whole test set
  transport::Digest model_digest{};
  std::uint64_t rounds_changed = 0;  // rounds with changed_coordinates > 0
  double seconds = 0.0;              // wall time of the run
  DefenceReport defences;            // what the server, the transport and the quarantine did
};

struct ExperimentOptions {
  // The server's round deadline (virtual time): after it n − b votes suffice; a delay attack
  // without its own delay sends at twice it, an exchange node waits half of it for its inputs.
  std::chrono::milliseconds round_deadline{3000};
  std::function<void(const ExperimentRound&)> on_round;  // called after every round
  // Stop early (reporting what ran) when this returns true after a round; null: never.
  std::function<bool()> cancelled;
};

// One round as a JSON object on one line (the metrics file of `ballot train --lockstep`).
std::string experiment_json_line(const ExperimentRound& round);

// Runs setup.options.rounds rounds. Errors: more votes absent in a round than the fault budget b
// allows (the real server would stall: kUnavailable naming the round), or what model creation
// returns.
Result<ExperimentResult> run_experiment(const TrainingSetup& setup, const ExperimentOptions& options = {});

}  // namespace ballot::runtime

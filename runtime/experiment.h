// The lockstep experiment engine: the same deterministic round logic as the server and nodes
// (runtime/training.h, runtime/adversary.h), run in one thread without transport, for security
// evaluations and for hundreds of nodes.
//
// Honest nodes that compute the same partition of the same round on the same model get the same
// signs (the sampler and the worker momentum are functions of (seed, round, partition) and the
// decisions): the engine computes each partition once per round and lets every honest node that
// holds it use the result. A round therefore costs n partition gradients whatever the code's
// redundancy, against n·r in the message-passing simulator. With no fault the final model is
// bit-identical to simulate() and to the process cluster for the same options (tested).
//
// Protocol-domain attacks act on the wire; here they only make the attacker's vote absent for the
// round (crash, omission, delay past the deadline) or rejected (equivocation, replay, forgery,
// malformed or oversized frames, wrong digest). What the real defences do against them —
// rejected frames, quarantine, equivocation proofs — is measured by simulate() over the
// in-memory transport, whose verifier and quarantine are the real ones.
//
// Exchange placement: the honest votes are the same as in the replicated placement (each node
// votes over the signs its row's sources computed, which are the signs it would compute itself),
// so the engine runs it as the replicated one; attacks on what a source relays (data- and
// protocol-domain) are not modelled here and are kUnavailable (simulate() runs them).
//
// The engine also computes the attack-free decision of every round (each Byzantine node's vote
// replaced by the honest vote it would have sent) and reports where the applied decision differs.
// Thread-safety: run_experiment is reentrant; several may run at once on different setups.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "learning/model.h"
#include "runtime/training.h"
#include "transport/crypto.h"

namespace ballot::runtime {

struct ExperimentRound {
  std::uint64_t round = 0;
  double mean_loss = 0.0;     // mean batch loss of the votes counted
  std::size_t votes = 0;      // votes counted (absent: crashed, omitted, rejected attackers)
  bool evaluated = false;     // test evaluation this round (options.eval_every, and the last)
  learning::Evaluation test;  // when evaluated
  // Sign path: coordinates where the applied decision differs from the attack-free one.
  // Gradient path: coordinates whose sign differs between the aggregate and the attack-free one.
  std::size_t changed_coordinates = 0;
};

struct ExperimentResult {
  std::vector<ExperimentRound> rounds;
  learning::Evaluation test;  // final, on the whole test set
  transport::Digest model_digest{};
  std::uint64_t rounds_changed = 0;  // rounds with changed_coordinates > 0
  double seconds = 0.0;
};

struct ExperimentOptions {
  std::function<void(const ExperimentRound&)> on_round;  // called after every round
  // Stop early (reporting what ran) when this returns true after a round; null: never.
  std::function<bool()> cancelled;
};

// Runs setup.options.rounds rounds. Errors: a setup the engine cannot run (e.g. more absent
// votes in a round than the fault budget b allows — the real server would stall: kUnavailable
// naming the round), or what model creation returns.
// One round as a JSON object on one line (the metrics file of `ballot train --lockstep`).
std::string experiment_json_line(const ExperimentRound& round);

Result<ExperimentResult> run_experiment(const TrainingSetup& setup, const ExperimentOptions& options = {});

}  // namespace ballot::runtime

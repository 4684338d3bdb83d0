// The server side of one run's round protocol (DESIGN.md, docs/protocol.md) as a session: one
// handler per message, driven round by round by its caller (Server::run, runtime/roles.h).
//
//   session.begin(first_round);          // a resumed run's state to every node; wait for Joins
//   for each round r:
//     session.open_round(r);             // RoundStart{r} to every node
//     session.collect();                 // votes until all n, or ≥ n − b after the deadline
//     auto decision = session.decide();  // the majority (or robust rule) of the counted votes;
//                                        // the round's report filled
//     … report, log …                    // (evaluation and checkpoint need apply_decision() first)
//     session.send_decision(decision);
//     session.apply_decision();          // the replica takes the step while the decision travels
//   session.finish(rounds);              // Finish to every node
//
// Between open_round and decide the session answers on its own: a Join gets the state (when the
// node is at another round) and the round's start; a vote on another model gets the state once
// per round; forwarded evidence is checked and its author quarantined; malformed, late or
// out-of-round messages are counted and dropped. No payload is trusted. Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/result.h"
#include "runtime/node_session.h"
#include "runtime/quarantine.h"
#include "runtime/replica.h"
#include "runtime/session_clock.h"
#include "runtime/training.h"
#include "transport/transport.h"

namespace ballot::runtime {

// What the server knows after each round, for progress displays and metrics.
struct RoundReport {
  std::uint64_t round = 0;
  std::size_t votes = 0;             // counted votes
  std::vector<std::size_t> missing;  // node indices without a counted vote
  double mean_loss = 0.0;            // mean of the counted votes' finite batch losses (a metric)
  bool evaluated = false;
  learning::Evaluation test;             // when evaluated
  double seconds = 0.0;                  // wall time of the round
  double vote_wait_seconds = 0.0;        // of which waiting for votes (compute + transport)
  std::uint64_t bytes_per_vote = 0;      // payload bytes of one vote
  std::uint64_t fp32_bytes = 0;          // what an fp32 gradient would have been
  std::uint64_t bytes_per_decision = 0;  // payload bytes of the decision (sparse when it is smaller)
  std::uint64_t rejected_messages = 0;   // dropped this round (malformed, wrong round, wrong model)
  std::uint64_t late_votes = 0;          // votes for a round already decided (ignored, no blame)
  std::vector<std::size_t> out_of_sync;  // nodes whose vote was on another model (sent the state)
  std::uint64_t send_failures = 0;       // sends to unreachable nodes so far (skipped, not fatal)
  std::vector<std::size_t> quarantined;  // node indices whose votes are no longer counted
};

// With skip_absent, how often a node that missed is waited for anyway (collect()): a bound on how
// long an honest node whose votes keep arriving just after the others' stays uncounted.
inline constexpr std::uint64_t kAbsentProbeEvery = 8;

struct ServerSessionOptions {
  std::chrono::milliseconds round_deadline{3000};       // after it, n − b votes suffice
  std::chrono::milliseconds quorum_timeout{120000};     // no quorum for this long: kTimeout
  std::chrono::milliseconds join_wait{0};               // for every node's Join before round one (0: one deadline)
  std::shared_ptr<Quarantine> quarantine;               // null: no quarantine
  std::shared_ptr<const transport::Registry> registry;  // to check signatures of relayed inputs and proofs
  std::shared_ptr<SessionClock> clock;                  // null: the steady clock (runtime/session_clock.h)
  // The decision goes out in pieces, one to each node whose vote was counted, and those nodes
  // relay their piece to every other node (with the server's signature): the server's link
  // carries one decision a round instead of n. A node that misses a piece asks for the whole
  // decision (DecisionRequest), which the server sends once per node and round.
  bool relay_decisions = false;
  // Once the quorum is in, do not wait for a node whose vote did not count in the last round and
  // that sent nothing since (collect()). `ballot server` sets it; the simulator and the lockstep
  // engine leave it off, so that which votes count does not depend on their threads' timing.
  bool skip_absent = false;
};

class ServerSession {
 public:
  ServerSession(const TrainingSetup& setup, transport::Transport& transport, Replica& replica,
                ServerSessionOptions options);
  ~ServerSession();
  ServerSession(const ServerSession&) = delete;
  ServerSession& operator=(const ServerSession&) = delete;

  // Before the first round (`first_round` > 0: resumed from a checkpoint, the replica holds its
  // state): sends that state to every node, then waits for their Joins (ServerSessionOptions).
  Status begin(std::uint64_t first_round);
  // Starts `round`: its RoundStart to every node; the round's report starts empty.
  Status open_round(std::uint64_t round);
  // Handles messages until every node that is not quarantined voted, or the deadline passed with
  // a quorum (n − b). kTimeout when no quorum came within the deadline plus quorum_timeout. With
  // skip_absent, a node whose vote did not count, and of which nothing reached the session since,
  // is waited for (once the quorum is in) only every kAbsentProbeEvery rounds after the round it
  // missed: a crashed or cut-off node costs one deadline in kAbsentProbeEvery rounds, not one per
  // round; any message of it that reaches the session (a Join, a decision request, a vote of the
  // round being collected) makes it waited for again.
  Status collect();
  // Decides the round over the counted votes and returns the decision's payload (Decision or
  // FloatDecision) for send_decision. The replica takes the step in apply_decision(), so that a
  // caller can send first: the server's update is then off the round's critical path.
  Result<std::vector<std::uint8_t>> decide();
  // Applies the last decision to the replica (once; a no-op when applied). open_round() and
  // finish() apply it if the caller did not.
  void apply_decision();
  // decide()'s payload to every node, or in pieces through the counted voters (relay_decisions).
  // The decision stays held until the next one, for nodes that ask for it.
  Status send_decision(std::vector<std::uint8_t> decision);
  // Finish{rounds} to every node (best effort: a node that is gone does not matter any more).
  // Before it, when this session ran the last round, a node whose vote did not count in it (it may
  // be rounds behind: slower than the deadline, cut off, restarted) gets the final state, so that
  // every node that can be reached ends with the run's final parameters; quarantined nodes do not.
  void finish(std::uint64_t rounds);

  // The report of the round being run: collect() counts what it dropped, decide() fills the votes,
  // missing, quarantined and mean loss; the caller adds timing and evaluation.
  RoundReport& report() noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ballot::runtime

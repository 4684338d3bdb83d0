// The two roles of the round protocol (DESIGN.md), written against transport::Transport so that
// the same code runs over mutual TLS between processes (the cluster) and over the in-memory
// transport (the simulator). Each role is a driver over its session, which holds the protocol:
// Server::run drives a ServerSession (runtime/server_session.h) and keeps checkpoints, evaluation
// and reports; Node::run drives a NodeSession (runtime/node_session.h) with the C++ NodeWorker and
// keeps the node state; a Byzantine node's behaviour is its session's NodeAdversary
// (runtime/node_attacks.h).
//
// Ids: the server is node id 0, node i (row i of G) is node id i + 1.
//
// Server, each round r:  RoundStart{r} to every node → votes until all n arrived, or at least
//   n − b once the deadline passed (late votes of round r are ignored) → Decision{r} = majority
//   of the votes held → apply it to its own replica → checkpoint every k rounds, in between
//   append it to the decision log (runtime/decision_log.h) → send it. A vote computed
//   on another model (digest mismatch) is not counted; that node gets the current state instead.
// Node i: Join{its round} on start (the server answers with the current state when the node is
//   behind: this is how a restarted node rejoins), then for each RoundStart{r}: its vote c_i;
//   for each Decision{r}: apply. Finish ends the node.
// Exchange placement (TrainingOptions::placement): on RoundStart{r} node j computes partition j
//   only, seals its signs once (kPartitionSigns) and sends them to every node i with G[i][j] = 1 (its
//   own input stays local); node i collects the inputs of its row for round r until it has all of
//   them or NodeOptions::exchange_input_fraction of the round deadline passed, votes over them
//   (coding::encode_exchange: a missing or unusable input abstains) and sends an AuditedVote: the
//   vote and the signed envelopes of the inputs it counted. The server checks each envelope
//   (job, round, author in the voter's row, author's signature when it has the registry) and
//   compares the digests counted for one author across votes: two different ones are an
//   equivocation proof, handed to the quarantine. A node whose own verifier caught a peer
//   equivocating forwards the proof (Evidence); the server checks it and quarantines the author.
// Neither role trusts a payload: decoding errors and protocol violations are counted in the
// report and the message is dropped.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "runtime/checkpoint.h"
#include "runtime/decision_log.h"
#include "runtime/node_session.h"
#include "runtime/node_worker.h"
#include "runtime/quarantine.h"
#include "runtime/replica.h"
#include "runtime/server_session.h"
#include "runtime/signed_record.h"
#include "runtime/training.h"
#include "transport/envelope.h"
#include "transport/identity.h"
#include "transport/transport.h"

namespace ballot::runtime {

// What the defences did over the run: for reporting attacks by their effect.
struct DefenceReport {
  std::uint64_t rejected_messages = 0;                              // dropped by the server's own checks
  std::vector<std::size_t> quarantined;                             // node indices
  std::vector<std::pair<std::size_t, std::uint64_t>> misbehaviour;  // node index, evidence events (> 0 only)
  std::vector<std::pair<std::size_t, std::uint64_t>> late;          // node index, lateness events (> 0 only)
  // node index, second sessions refused while its session was live (> 0 only; runtime/quarantine.h)
  std::vector<std::pair<std::size_t, std::uint64_t>> duplicate_sessions;
  std::uint64_t unauthenticated = 0;  // connections that failed before authentication (no node blamed)
  std::size_t equivocation_proofs = 0;
  std::uint64_t out_of_sync_votes = 0;  // votes on another model (answered with the state)
};

// The quarantine's part of a DefenceReport over nodes 0..n−1: who is quarantined, the evidence,
// lateness and duplicate-session events per node, the failures before authentication, and the
// equivocation proofs.
void add_quarantine_report(const Quarantine& quarantine, std::size_t nodes, DefenceReport& report);

struct TrainingSummary {
  std::uint64_t first_round = 0;         // > 0 when resumed (checkpoint and decision log)
  std::uint64_t replayed_decisions = 0;  // of first_round: from the decision log after the checkpoint
  std::uint64_t rounds = 0;              // rounds completed in total
  learning::Evaluation test;
  transport::Digest model_digest{};
  double seconds = 0.0;
  DefenceReport defences;
};

struct ServerOptions {
  std::chrono::milliseconds round_deadline{3000};    // after it, n − b votes suffice
  std::chrono::milliseconds quorum_timeout{120000};  // no quorum for this long: the run stops
  // Before its first round the server waits up to this long for every node's Join (0: one
  // round deadline).
  std::chrono::milliseconds join_wait{0};
  // Empty: no checkpoints. Beside it, the decision log (runtime/decision_log.h) of the decisions
  // sent since the latest checkpoint (none with checkpoint_every 0: no periodic checkpoints).
  std::filesystem::path checkpoint_path;
  std::uint64_t checkpoint_every = 50;
  bool relay_decisions = false;                      // ServerSessionOptions::relay_decisions
  bool skip_absent = false;                          // ServerSessionOptions::skip_absent (run_server: on)
  std::function<void(const RoundReport&)> on_round;  // called after every round
  // Shared with the transport as its misbehaviour observer; null: no quarantine.
  std::shared_ptr<Quarantine> quarantine;
  // Exchange placement: the pinned registry, to check the authors' signatures on the inputs a
  // vote counted (and so to turn two different counted digests into a checkable proof). Null:
  // the digests are still compared, and a conflict is reported as plain misbehaviour.
  std::shared_ptr<const transport::Registry> registry;
};

class Server {
 public:
  Server(const TrainingSetup& setup, transport::Transport& transport, ServerOptions options);
  // Runs from where the checkpoint and the decision log after it leave off (when they exist) to
  // options.rounds; then Finish.
  Result<TrainingSummary> run();

 private:
  // The checkpoint's replica moved on by the logged decisions that follow it; the log to append to.
  Result<DecisionLog> resume_from_log(Replica& replica, TrainingSummary& summary);
  Status save_replica(const Replica& replica, std::uint64_t round) const;  // the checkpoint of `round`
  Status save_checkpoint_and_restart_log(const Replica& replica, std::uint64_t round, DecisionLog& log);
  const TrainingSetup& setup_;
  transport::Transport& transport_;
  ServerOptions options_;
};

class Coalition;  // runtime/adversary.h

struct NodeOptions {
  std::chrono::milliseconds idle_timeout{300000};  // nothing from the server this long: give up
  std::chrono::milliseconds join_retry{1000};      // re-send Join while no round has started
  // Exchange placement: how long node i waits for the inputs of its row, as a fraction of the
  // round deadline the server announced; then it votes without the missing ones (they abstain).
  // Clamped to [0, 1]; below 1 so that the vote reaches the server before its own deadline.
  double exchange_input_fraction = 0.5;
  // Attackers of one process share their view of the honest messages (the simulator); null: a
  // Byzantine node that needs one computes its own.
  std::shared_ptr<Coalition> coalition;
  // The node's own transport observer (set it as the transport's observer): the equivocation
  // proofs its verifier finds — a peer sent it two different signed payloads of one type in one
  // round — are forwarded to the server as Evidence. Null: none are forwarded.
  std::shared_ptr<Quarantine> evidence;
  // Node state — the worker momentum of its partitions and its codec's error-feedback memory,
  // which the server's checkpoint does not hold — saved as state_dir/node-<index>.state (a
  // runtime/checkpoint.h file, atomic replace) when the node enters a round that is a multiple of
  // state_every (use the server's checkpoint_every). When a state transfer later brings the node
  // to exactly that round — it restarted, or the server resumed from its checkpoint — the state
  // is restored, so the run continues as if nothing had happened. Empty: no state files.
  // The node's signed record (runtime/signed_record.h) lives beside it as node-<index>.signed:
  // with a state_dir the node never signs two different votes or partition signs for one round,
  // restarts included; without one, only within one process.
  std::filesystem::path state_dir;
  std::uint64_t state_every = 50;
  // The pinned registry, to check the signatures of the signed record read back. Null: unchecked.
  std::shared_ptr<const transport::Registry> registry;
  bool relayed_decisions = false;  // NodeSessionOptions::relayed_decisions (the cluster's relay_decisions)
};

// The node state file of node `index` in `dir` (NodeOptions::state_dir), and its signed record.
std::filesystem::path node_state_path(const std::filesystem::path& dir, std::size_t index);
std::filesystem::path signed_record_path(const std::filesystem::path& dir, std::size_t index);

struct NodeSummary {
  std::uint64_t rounds = 0;  // rounds applied
  std::uint64_t votes_sent = 0;
  std::uint64_t inputs_missing = 0;       // exchange: inputs of its row that abstained, over the run
  std::uint64_t inputs_rejected = 0;      // exchange: received inputs not counted (wrong round/model, equivocating)
  std::uint64_t rejoins = 0;              // state transfers received
  std::uint64_t states_restored = 0;      // of which continued with the node's own saved state
  std::uint64_t abstained = 0;            // messages not sent: another one was signed for that round before
  std::uint64_t pieces_relayed = 0;       // relayed decisions: the server's pieces handed on
  std::uint64_t decisions_requested = 0;  // relayed decisions: pieces missing, the decision asked for whole
  bool crashed = false;                   // stopped by the crash attack
  transport::Digest model_digest{};
};

// The NodeSessionOptions of node `node_index` run with `options` (its adversary from the run's
// attack spec, its signed record in options.state_dir): what Node::run opens its session with,
// and what another driver of a cluster's node (ballot.session) uses to behave the same.
NodeSessionOptions node_session_options(const TrainingSetup& setup, std::size_t node_index, Replica& replica,
                                        const NodeOptions& options);

// The node state of NodeOptions::state_dir for a driver that computes with a NodeWorker:
// loaded at construction (a damaged file is reported on stderr and ignored), saved when the node
// applies the decision of a multiple of state_every, restored after a state transfer to the
// round it was saved in. Feed it every event of the session (observe). No state_dir: nothing.
class NodeStateKeeper {
 public:
  NodeStateKeeper(const NodeOptions& options, std::size_t node_index);
  void observe(const NodeEvent& event, NodeWorker& worker, NodeSession& session, const Replica& replica);
  // Whether observe(event) saves the node state (a driver keeping the worker momentum elsewhere
  // hands it back to the NodeWorker first).
  bool saves(const NodeEvent& event) const noexcept;
  std::uint64_t restored() const noexcept { return restored_; }

 private:
  std::filesystem::path path_;
  std::uint64_t every_ = 0;
  std::size_t index_ = 0;
  std::optional<Checkpoint> saved_;
  std::uint64_t restored_ = 0;
};

class Node {
 public:
  Node(const TrainingSetup& setup, std::size_t node_index, transport::Transport& transport, NodeOptions options = {});
  Result<NodeSummary> run();

 private:
  const TrainingSetup& setup_;
  std::size_t index_;
  transport::Transport& transport_;
  NodeOptions options_;
};

}  // namespace ballot::runtime

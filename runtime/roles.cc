#include "runtime/roles.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "coding/codec.h"
#include "core/json_nesting.h"
#include "core/spec.h"
#include "runtime/checkpoint.h"
#include "runtime/decision_log.h"
#include "runtime/node_attacks.h"
#include "runtime/node_worker.h"
#include "runtime/replica.h"

namespace ballot::runtime {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The server checkpoint's record of the options that make the run what it is (who computes which
// partitions, from what data and model, with which update): a checkpoint of another run is
// refused rather than continued with other votes. The schedule, the round count, the evaluation
// and the attack may change between restarts. Checkpoints without it (older ones) are accepted.
constexpr std::string_view kRunSection = "run";

// Files are named by what they hold, not where they lie (a moved dataset, code or parameter file
// is the same run): the code by G itself, the dataset by its kind, a parameter file by its size
// (the replica checks it, and the nodes the layout digest when they join).
nlohmann::json run_identity(const TrainingSetup& setup) {
  const TrainingOptions& o = setup.options;
  const std::string g = setup.code.to_text();
  const auto data = Spec::parse(o.data);
  const bool named_dataset = data.ok() && (data->name() == "fashion-mnist" || data->name() == "mnist");
  return {{"nodes", o.nodes},
          {"byzantine", o.byzantine},
          {"code", transport::to_hex(transport::sha256(
                       transport::ByteSpan(reinterpret_cast<const std::uint8_t*>(g.data()), g.size())))},
          {"placement", std::string(placement_name(o.placement))},
          {"model", o.model.rfind("init:", 0) == 0 ? std::string("init") : o.model},
          {"update", o.update},
          {"worker_momentum", o.worker_momentum},
          {"partition_size", o.partition_size},
          {"seed", o.seed},
          {"job", o.job},
          {"data", named_dataset ? data->name() : o.data},
          {"rule", o.rule},
          {"codec", o.codec}};
}

Status check_same_run(const Checkpoint& checkpoint, const TrainingSetup& setup, const std::filesystem::path& path) {
  const auto it = checkpoint.sections.find(std::string(kRunSection));
  if (it == checkpoint.sections.end()) return {};
  const std::string_view text(reinterpret_cast<const char*>(it->second.data()), it->second.size());
  if (!json_nesting_ok(text)) {
    return make_error(ErrorCode::kMalformed, "checkpoint '" + path.string() +
                                                 "': its run section is nested deeper than " +
                                                 std::to_string(kMaxJsonNesting) + " levels");
  }
  const auto saved = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto now = run_identity(setup);
  if (!saved.is_object())
    return make_error(ErrorCode::kMalformed, "checkpoint '" + path.string() + "': its run section is not JSON");
  std::string differences;
  for (const auto& [key, value] : now.items()) {
    const auto was = saved.find(key);
    if (was != saved.end() && *was == value) continue;
    differences += (differences.empty() ? "" : ", ") + key + " " +
                   (was == saved.end() ? std::string("(none)")
                                       : was->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) +
                   " → " + value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  if (differences.empty()) return {};
  return make_error(ErrorCode::kInvalidArgument,
                    "checkpoint '" + path.string() + "' is of another run (" + differences +
                        "): restore the run's options, or give this run another checkpoint path");
}

}  // namespace

Server::Server(const TrainingSetup& setup, transport::Transport& transport, ServerOptions options)
    : setup_(setup), transport_(transport), options_(std::move(options)) {}

// The server's loop: the server session speaks the protocol, this keeps the run — checkpoints,
// evaluation, the per-round report and the summary.
Result<TrainingSummary> Server::run() {
  const auto started = Clock::now();
  BALLOT_ASSIGN_OR_RETURN(Replica replica, Replica::create(setup_));
  TrainingSummary summary;
  std::optional<DecisionLog> log;
  if (!options_.checkpoint_path.empty()) {
    auto checkpoint = load_checkpoint(options_.checkpoint_path);
    if (checkpoint.ok()) {
      BALLOT_TRY(check_same_run(*checkpoint, setup_, options_.checkpoint_path));
      BALLOT_TRY(replica.restore_from(*checkpoint));
      summary.first_round = checkpoint->round;
    } else if (checkpoint.error().code != ErrorCode::kNotFound) {
      return std::move(checkpoint).error();  // a damaged checkpoint must not be silently ignored
    }
    // Without periodic checkpoints (checkpoint_every 0) there is nothing to replay from, and the
    // log would grow by a decision a round for the whole run: none is kept.
    if (options_.checkpoint_every != 0) {
      BALLOT_ASSIGN_OR_RETURN(log, resume_from_log(replica, summary));
    }
    if (summary.first_round > setup_.options.rounds) {
      return make_error(ErrorCode::kInvalidArgument, "checkpoint '" + options_.checkpoint_path.string() +
                                                         "' is at round " + std::to_string(summary.first_round) +
                                                         ", past this run's " + std::to_string(setup_.options.rounds) +
                                                         " rounds: raise rounds to continue it");
    }
  }
  ServerSession session(setup_, transport_, replica,
                        ServerSessionOptions{.round_deadline = options_.round_deadline,
                                             .quorum_timeout = options_.quorum_timeout,
                                             .join_wait = options_.join_wait,
                                             .quarantine = options_.quarantine,
                                             .registry = options_.registry,
                                             .relay_decisions = options_.relay_decisions,
                                             .skip_absent = options_.skip_absent});
  BALLOT_TRY(session.begin(summary.first_round));
  // A round's time runs from the last decision sent to this one: it includes the server's update
  // of the replica, which runs after the send, while the decision travels.
  auto round_started = Clock::now();
  for (std::uint64_t round = summary.first_round; round < setup_.options.rounds; ++round) {
    BALLOT_TRY(session.open_round(round));
    BALLOT_TRY(session.collect());
    BALLOT_ASSIGN_OR_RETURN(auto decision, session.decide());
    RoundReport& report = session.report();
    const std::uint64_t done = round + 1;
    const auto every = setup_.options.eval_every;
    const bool evaluate = done == setup_.options.rounds || (every != 0 && done % every == 0);
    const bool checkpoint = log && (done % options_.checkpoint_every == 0 || done == setup_.options.rounds);
    // The evaluation and the checkpoint are of the model after this decision.
    if (evaluate || checkpoint) session.apply_decision();
    if (evaluate) {
      report.test = replica.evaluate(setup_.data->test, setup_.options.eval_examples);
      report.evaluated = report.test.count > 0;  // not with a parameters-only model or no test set
    }
    report.seconds = seconds_since(round_started);
    summary.defences.rejected_messages += report.rejected_messages;
    summary.defences.out_of_sync_votes += report.out_of_sync.size();
    // The round's report (its metrics row) is out before the checkpoint that includes the round:
    // a server killed in between resumes from an earlier checkpoint and redoes the round, whose
    // row then replaces this one; reported after the checkpoint, a kill in between would resume
    // past a round that never got its row.
    if (options_.on_round) options_.on_round(report);
    // The decision goes out only after the checkpoint that includes it is saved: a node saves its
    // own state when it applies the decision of a checkpoint round, so the server's latest
    // checkpoint is never older than a node's latest state, and a resumed run can restore both.
    // Between checkpoints, the decision is in the log before it goes out: a restarted server
    // resumes where the nodes are, instead of redoing rounds they have seen decided.
    if (checkpoint) {
      BALLOT_TRY(save_checkpoint_and_restart_log(replica, done, *log));
    } else if (log) {
      BALLOT_TRY(log->append(round, decision));
    }
    BALLOT_TRY(session.send_decision(std::move(decision)));
    round_started = Clock::now();
    session.apply_decision();
  }

  const std::size_t n = setup_.options.nodes;
  summary.rounds = setup_.options.rounds;
  summary.test = replica.evaluate(setup_.data->test, setup_.data->test.size());
  summary.model_digest = replica.digest();
  if (options_.quarantine) add_quarantine_report(*options_.quarantine, n, summary.defences);
  session.finish(summary.rounds);  // tell every node to stop
  summary.seconds = seconds_since(started);
  return summary;
}

Status Server::save_replica(const Replica& replica, std::uint64_t round) const {
  Checkpoint checkpoint;
  checkpoint.round = round;
  replica.save_to(checkpoint);
  const std::string run = run_identity(setup_).dump();
  checkpoint.sections[std::string(kRunSection)].assign(run.begin(), run.end());
  return save_checkpoint(options_.checkpoint_path, checkpoint);
}

Status Server::save_checkpoint_and_restart_log(const Replica& replica, std::uint64_t round, DecisionLog& log) {
  BALLOT_TRY(save_replica(replica, round));
  // A kill between the two leaves a log of rounds the checkpoint already holds: skipped on resume.
  BALLOT_ASSIGN_OR_RETURN(log, DecisionLog::start(decision_log_path(options_.checkpoint_path), round));
  return {};
}

Result<DecisionLog> Server::resume_from_log(Replica& replica, TrainingSummary& summary) {
  const auto path = decision_log_path(options_.checkpoint_path);
  const auto replay = [&](std::uint64_t round, std::span<const std::uint8_t> payload) {
    if (round < summary.first_round) return true;  // the checkpoint holds it
    if (round != summary.first_round || round >= setup_.options.rounds) return false;
    if (auto applied = replica.apply_decision(round, payload, setup_.sign_vote()); !applied.ok()) {
      std::fprintf(stderr, "server: decision of round %llu in '%s' not replayed: %s\n",
                   static_cast<unsigned long long>(round), path.string().c_str(), applied.error().to_string().c_str());
      return false;
    }
    ++summary.first_round;
    ++summary.replayed_decisions;
    return true;
  };
  const auto scanned = scan_decision_log(path, replay);
  if (!scanned.ok() && scanned.error().code != ErrorCode::kNotFound) {
    return scanned.error();  // not a decision log: never silently overwritten
  }
  if (scanned.ok() && scanned->dropped_bytes != 0) {
    std::fprintf(stderr, "server: %zu bytes at the end of '%s' ignored (a write it never finished)\n",
                 scanned->dropped_bytes, path.string().c_str());
  }
  // The replayed state becomes a checkpoint, so that the log can start afresh.
  if (summary.replayed_decisions != 0) BALLOT_TRY(save_replica(replica, summary.first_round));
  return DecisionLog::start(path, summary.first_round);
}

void add_quarantine_report(const Quarantine& quarantine, std::size_t nodes, DefenceReport& report) {
  for (std::size_t i = 0; i < nodes; ++i) {
    if (quarantine.is_quarantined(node_id(i))) report.quarantined.push_back(i);
    if (const auto events = quarantine.events(node_id(i)); events > 0) report.misbehaviour.emplace_back(i, events);
    if (const auto late = quarantine.late(node_id(i)); late > 0) report.late.emplace_back(i, late);
    if (const auto duplicates = quarantine.duplicate_sessions(node_id(i)); duplicates > 0)
      report.duplicate_sessions.emplace_back(i, duplicates);
  }
  report.unauthenticated = quarantine.unauthenticated();
  report.equivocation_proofs = quarantine.proofs().size();
}

Node::Node(const TrainingSetup& setup, std::size_t node_index, transport::Transport& transport, NodeOptions options)
    : setup_(setup), index_(node_index), transport_(transport), options_(std::move(options)) {}

std::filesystem::path node_state_path(const std::filesystem::path& dir, std::size_t index) {
  return dir / ("node-" + std::to_string(index) + ".state");
}

std::filesystem::path signed_record_path(const std::filesystem::path& dir, std::size_t index) {
  return dir / ("node-" + std::to_string(index) + ".signed");
}

NodeSessionOptions node_session_options(const TrainingSetup& setup, std::size_t node_index, Replica& replica,
                                        const NodeOptions& options) {
  NodeSessionOptions session_options;
  session_options.idle_timeout = options.idle_timeout;
  session_options.join_retry = options.join_retry;
  session_options.exchange_input_fraction = options.exchange_input_fraction;
  session_options.evidence = options.evidence;
  session_options.adversary = make_node_adversary(setup, node_index, replica, options.coalition);
  if (!options.state_dir.empty()) session_options.record_path = signed_record_path(options.state_dir, node_index);
  session_options.registry = options.registry;
  session_options.relayed_decisions = options.relayed_decisions;
  // Rewinds reach back at most one checkpoint interval (the server resumes from its latest).
  session_options.record_rounds = 2 * options.state_every + 64;
  return session_options;
}

NodeStateKeeper::NodeStateKeeper(const NodeOptions& options, std::size_t node_index)
    : path_(options.state_dir.empty() ? std::filesystem::path() : node_state_path(options.state_dir, node_index)),
      every_(options.state_every),
      index_(node_index) {
  if (path_.empty()) return;
  if (auto loaded = load_checkpoint(path_); loaded.ok()) {
    saved_ = std::move(*loaded);
  } else if (loaded.error().code != ErrorCode::kNotFound) {
    // A damaged file loses the saved state, not the run: the node continues as a fresh one.
    std::fprintf(stderr, "node %zu: ignoring its state file: %s\n", index_, loaded.error().to_string().c_str());
  }
}

bool NodeStateKeeper::saves(const NodeEvent& event) const noexcept {
  return !path_.empty() && event.kind == NodeEvent::Kind::kDecided && every_ > 0 && event.round % every_ == 0;
}

void NodeStateKeeper::observe(const NodeEvent& event, NodeWorker& worker, NodeSession& session,
                              const Replica& replica) {
  if (path_.empty()) return;
  if (saves(event)) {
    Checkpoint state;
    state.round = event.round;
    state.sections["worker"] = worker.save_state();
    if (auto* codec = session.codec(); codec && codec->stateful()) state.sections["codec"] = codec->save_state();
    // A full disk or a lost directory costs the node its restart state, not the run.
    if (auto saved = save_checkpoint(path_, state); !saved.ok()) {
      std::fprintf(stderr, "node %zu: %s\n", index_, saved.error().to_string().c_str());
      return;
    }
    saved_ = std::move(state);
  } else if (event.kind == NodeEvent::Kind::kStateInstalled && event.moved) {
    // The node's own state of that round, when it saved one (not when the transfer only
    // re-synchronised the round it is in: its state there is already current).
    if (!saved_ || saved_->round != event.round) return;
    // All or nothing: a codec state that does not fit puts the worker's momentum back as it was.
    const auto restore = [&]() -> Status {
      const auto& sections = saved_->sections;
      const auto worker_before = worker.save_state();
      if (auto it = sections.find("worker"); it != sections.end())
        BALLOT_TRY(worker.load_state(it->second, replica.dimension()));
      if (auto it = sections.find("codec"); session.codec() && it != sections.end()) {
        if (auto loaded = session.codec()->load_state(it->second, replica.model().layout()); !loaded.ok()) {
          (void)worker.load_state(worker_before, replica.dimension());
          return loaded;
        }
      }
      return {};
    };
    if (auto restored = restore(); !restored.ok()) {
      std::fprintf(stderr, "node %zu: its state of round %llu does not fit: %s\n", index_,
                   static_cast<unsigned long long>(event.round), restored.error().to_string().c_str());
      return;
    }
    ++restored_;
  }
}

// The C++ worker loop: the node session speaks the protocol, this computes the rounds with the
// node's NodeWorker and keeps its node state (NodeOptions::state_dir, NodeStateKeeper).
Result<NodeSummary> Node::run() {
  BALLOT_ASSIGN_OR_RETURN(Replica replica, Replica::create(setup_));
  NodeWorker worker(setup_, index_);
  NodeSession session(setup_, index_, transport_, replica, node_session_options(setup_, index_, replica, options_));
  NodeStateKeeper node_state(options_, index_);
  NodeSummary summary;
  const auto finish = [&](bool crashed) {
    const auto& stats = session.stats();
    summary.rounds = stats.rounds;
    summary.votes_sent = stats.votes_sent;
    summary.inputs_missing = stats.inputs_missing;
    summary.inputs_rejected = stats.inputs_rejected;
    summary.rejoins = stats.rejoins;
    summary.abstained = stats.abstained;
    summary.pieces_relayed = stats.pieces_relayed;
    summary.decisions_requested = stats.decisions_requested;
    summary.states_restored = node_state.restored();
    summary.crashed = crashed;
    summary.model_digest = replica.digest();
    return summary;
  };

  BALLOT_TRY(session.start());
  BitVector signs;
  while (true) {
    BALLOT_ASSIGN_OR_RETURN(auto event, session.poll());
    node_state.observe(event, worker, session, replica);
    switch (event.kind) {
      case NodeEvent::Kind::kCompute: {
        const auto& work = event.work;
        if (work.kind == RoundWork::Kind::kPartitionSigns) {
          // Partition index_ with its worker momentum: what every node of the column would compute
          // for it in the replicated placement.
          const double loss = worker.partition_signs(replica, work.round, work.partitions.front(), signs);
          BALLOT_TRY(session.submit_partition_signs(loss, signs));
        } else if (work.kind == RoundWork::Kind::kVote) {
          const double loss = worker.vote(replica, work.round, signs);
          BALLOT_TRY(session.submit_vote(loss, signs));
        } else {
          // Encoded where the model left it, not copied (d floats a round).
          const double loss = worker.gradient(replica, work.round);
          BALLOT_TRY(session.submit_gradient(loss, replica.model().gradients()));
        }
        break;
      }
      case NodeEvent::Kind::kDecided:
      case NodeEvent::Kind::kStateInstalled:
        break;
      case NodeEvent::Kind::kFinished:
        return finish(false);
      case NodeEvent::Kind::kCrashed:
        return finish(true);
    }
  }
}

}  // namespace ballot::runtime

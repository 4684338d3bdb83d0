#include "runtime/roles.h"

#include <algorithm>
#include <deque>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <thread>

#include "attacks/protocol_attacks.h"
#include "coding/codec_registry.h"
#include "coding/election_encoder.h"
#include "robust/registry.h"
#include "runtime/adversary.h"
#include "runtime/checkpoint.h"
#include "runtime/messages.h"

namespace ballot::runtime {
namespace {

using Clock = std::chrono::steady_clock;
using transport::MessageType;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<transport::NodeId> all_nodes(std::size_t n) {
  std::vector<transport::NodeId> ids;
  for (std::size_t i = 0; i < n; ++i) ids.push_back(node_id(i));
  return ids;
}

// Sends that fail because one peer is unreachable (a crashed node whose queue filled up, a server
// that is restarting) must not stop the sender: the protocol recovers through deadlines and Join.
// Only a closed transport (kUnavailable) ends the role.
Status tolerate_peer_failure(Status status, std::uint64_t& failures) {
  if (status.ok() || status.error().code != ErrorCode::kUnavailable) {
    if (!status.ok()) ++failures;
    return {};
  }
  return status;
}

Checkpoint state_of(const Replica& replica, std::uint64_t round) {
  Checkpoint checkpoint;
  checkpoint.round = round;
  replica.save_to(checkpoint);
  return checkpoint;
}

}  // namespace

Server::Server(const TrainingSetup& setup, transport::Transport& transport, ServerOptions options)
    : setup_(setup), transport_(transport), options_(std::move(options)) {}

Result<TrainingSummary> Server::run() {
  const auto started = Clock::now();
  const std::size_t n = setup_.options.nodes;
  const std::size_t quorum = n - setup_.options.byzantine;
  BALLOT_ASSIGN_OR_RETURN(Replica replica, Replica::create(setup_));
  const std::size_t dimension = replica.dimension();

  TrainingSummary summary;
  if (!options_.checkpoint_path.empty()) {
    auto checkpoint = load_checkpoint(options_.checkpoint_path);
    if (checkpoint.ok()) {
      BALLOT_TRY(replica.restore_from(*checkpoint));
      summary.first_round = checkpoint->round;
    } else if (checkpoint.error().code != ErrorCode::kNotFound) {
      return std::move(checkpoint).error();  // a damaged checkpoint must not be silently ignored
    }
  }

  const auto nodes = all_nodes(n);
  std::uint64_t send_failures = 0;
  if (summary.first_round > 0) {
    // Resumed: nodes still running may be ahead of the checkpoint (or behind it); give everyone
    // this state. Each node installs it, rewinds its round window and answers with a Join.
    transport_.set_round(summary.first_round);
    BALLOT_TRY(tolerate_peer_failure(transport_.broadcast(nodes, MessageType::kCheckpoint, summary.first_round,
                                    encode_checkpoint(state_of(replica, summary.first_round))), send_failures));
  }
  BALLOT_ASSIGN_OR_RETURN(auto held, await_joins());
  // The gradient path's rule and the codec that validates and decodes what nodes send.
  std::unique_ptr<robust::Aggregator> aggregator;
  std::unique_ptr<coding::Codec> codec;
  std::size_t max_codec_bytes = 0;
  if (!setup_.sign_vote()) {
    BALLOT_ASSIGN_OR_RETURN(aggregator, robust::make_aggregator(setup_.options.rule));
    BALLOT_ASSIGN_OR_RETURN(codec, coding::make_codec(setup_.options.codec));
    max_codec_bytes = codec->wire_size(replica.model().layout());
  }
  // What the server holds from node i in a round.
  struct Received {
    double loss = 0;
    BitVector signs;              // sign path
    std::vector<float> gradient;  // gradient path, decoded
  };
  std::vector<std::optional<Received>> votes(n);
  // Nodes sent the state this round: one transfer per node and round, so that a node that keeps
  // voting on another model cannot make the server send the model again and again.
  std::vector<bool> state_sent(n);
  const bool exchange = setup_.options.placement == Placement::kExchange && setup_.sign_vote();
  // Exchange: the first input envelope counted for each author this round (from any vote), and
  // the authors already proven to equivocate this round.
  std::map<transport::NodeId, transport::SignedEnvelope> counted_inputs;
  std::set<transport::NodeId> equivocators;
  for (std::uint64_t round = summary.first_round; round < setup_.options.rounds; ++round) {
    const auto round_started = Clock::now();
    transport_.set_round(round);
    RoundReport report;
    report.round = round;
    report.send_failures = send_failures;
    report.fp32_bytes = dimension * sizeof(float);
    const RoundStart start{round, static_cast<std::uint32_t>(options_.round_deadline.count()), replica.digest()};
    BALLOT_TRY(tolerate_peer_failure(transport_.broadcast(nodes, MessageType::kRoundStart, round, encode(start)), send_failures));

    std::fill(votes.begin(), votes.end(), std::nullopt);
    std::fill(state_sent.begin(), state_sent.end(), false);
    counted_inputs.clear();
    equivocators.clear();
    std::size_t received = 0;
    const auto deadline = round_started + options_.round_deadline;
    const auto give_up = deadline + options_.quorum_timeout;
    // Every node has voted, or is quarantined (its votes would be dropped unread anyway).
    const auto all_in = [&] {
      for (std::size_t i = 0; i < n; ++i) {
        if (!votes[i] && !(options_.quarantine && options_.quarantine->is_quarantined(node_id(i)))) return false;
      }
      return true;
    };
    while (!all_in()) {
      const auto now = Clock::now();
      if (now >= deadline && received >= quorum) break;
      if (now >= give_up) {
        return make_error(ErrorCode::kTimeout, "round " + std::to_string(round) + ": only " +
                                                   std::to_string(received) + " of the quorum of " +
                                                   std::to_string(quorum) + " votes arrived");
      }
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
          (now < deadline ? deadline : give_up) - now);
      Result<transport::Message> message = make_error(ErrorCode::kTimeout, "");
      if (!held.empty()) {
        message = std::move(held.front());
        held.pop_front();
      } else {
        message = transport_.receive(std::min(wait, std::chrono::milliseconds(200)) + std::chrono::milliseconds(1));
      }
      if (!message.ok()) {
        if (message.error().code == ErrorCode::kTimeout) continue;
        return std::move(message).error();
      }
      if (message->from == kServerId || message->from > n) {
        ++report.rejected_messages;
        continue;
      }
      const std::size_t index = message->from - 1;
      if (options_.quarantine && options_.quarantine->is_quarantined(message->from)) {
        ++report.rejected_messages;
        continue;
      }
      if (message->type == MessageType::kControl) {
        auto control = decode_control(message->payload);
        if (control.ok() && std::holds_alternative<Evidence>(*control)) {
          // A node's verifier caught a peer equivocating: checkable here without the payloads.
          if (!accept_evidence(std::get<Evidence>(*control).proof)) {
            ++report.rejected_messages;
            if (options_.quarantine) options_.quarantine->report(message->from);
          }
          continue;
        }
        if (!control.ok() || !std::holds_alternative<Join>(*control)) {
          ++report.rejected_messages;
          continue;
        }
        // A (re)starting node: a node at another round (behind, or ahead of a resumed server)
        // gets the state before this round; every joining node gets this round's start (it may
        // have connected after the broadcast).
        if (std::get<Join>(*control).round != round) {
          BALLOT_TRY(tolerate_peer_failure(transport_.send(message->from, MessageType::kCheckpoint, round,
                                     encode_checkpoint(state_of(replica, round))), send_failures));
        }
        BALLOT_TRY(tolerate_peer_failure(transport_.send(message->from, MessageType::kRoundStart, round, encode(start)), send_failures));
        continue;
      }
      if (message->type == MessageType::kVote && message->round < round) {
        // A vote for a round already decided (sent before the deadline, read after it): late,
        // not malformed. A replay of an old frame is the transport's to catch (sequence window).
        ++report.late_votes;
        if (options_.quarantine) options_.quarantine->report_late(message->from);
        continue;
      }
      if (message->type != MessageType::kVote || message->round != round) {
        ++report.rejected_messages;
        continue;
      }
      // Decode and validate: any failure drops the message and counts against the sender.
      std::optional<Received> accepted;
      transport::Digest vote_digest{};
      if (exchange) {
        if (auto vote = decode_audited_vote(message->payload, dimension, n);
            vote.ok() && vote->vote.round == round && inputs_valid(index, round, vote->inputs)) {
          audit_inputs(vote->inputs, counted_inputs, equivocators);
          vote_digest = vote->vote.model_digest;
          accepted = Received{vote->vote.loss, std::move(vote->vote.signs), {}};
        }
      } else if (setup_.sign_vote()) {
        if (auto vote = decode_vote(message->payload, dimension); vote.ok() && vote->round == round) {
          vote_digest = vote->model_digest;
          accepted = Received{vote->loss, std::move(vote->signs), {}};
        }
      } else if (auto vote = decode_encoded_vote(message->payload, max_codec_bytes);
                 vote.ok() && vote->round == round) {
        if (auto gradient = codec->decode(vote->bytes, replica.model().layout()); gradient.ok()) {
          vote_digest = vote->model_digest;
          accepted = Received{vote->loss, {}, std::move(*gradient)};
        }
      }
      if (!accepted) {
        ++report.rejected_messages;
        if (options_.quarantine) options_.quarantine->report(message->from);
        continue;
      }
      if (vote_digest != start.model_digest) {
        // A node that restarted, paused or missed a decision is out of sync and gets the state
        // (once per round: one that keeps voting on another model costs one transfer a round).
        // Stale state is lateness, not evidence (runtime/quarantine.h).
        if (options_.quarantine) options_.quarantine->report_late(message->from);
        report.out_of_sync.push_back(index);
        if (!state_sent[index]) {
          state_sent[index] = true;
          BALLOT_TRY(tolerate_peer_failure(transport_.send(message->from, MessageType::kCheckpoint, round,
                                     encode_checkpoint(state_of(replica, round))), send_failures));
          BALLOT_TRY(tolerate_peer_failure(transport_.send(message->from, MessageType::kRoundStart, round, encode(start)), send_failures));
        }
        continue;
      }
      report.bytes_per_vote = message->payload.size();
      if (!votes[index]) ++received;
      votes[index] = std::move(accepted);
    }
    report.vote_wait_seconds = seconds_since(round_started);

    std::vector<const BitVector*> counted;
    std::vector<std::span<const float>> gradients;
    double loss = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (votes[i]) {
        counted.push_back(&votes[i]->signs);
        gradients.emplace_back(votes[i]->gradient);
        loss += votes[i]->loss;
      } else {
        report.missing.push_back(i);
      }
    }
    report.votes = counted.size();
    if (options_.quarantine) {
      for (auto id : options_.quarantine->quarantined()) {
        if (id != kServerId && id <= n) report.quarantined.push_back(id - 1);
      }
    }
    report.mean_loss = counted.empty() ? 0.0 : loss / static_cast<double>(counted.size());
    // The result goes out only after the checkpoint that includes it is saved: a node saves its
    // own state when it applies the result of a checkpoint round, so the server's latest
    // checkpoint is never older than a node's latest state, and a resumed run can restore both.
    const std::uint64_t done = round + 1;
    const auto checkpoint_then_broadcast = [&](std::vector<std::uint8_t> result) -> Status {
      if (!options_.checkpoint_path.empty() && options_.checkpoint_every != 0 &&
          (done % options_.checkpoint_every == 0 || done == setup_.options.rounds)) {
        BALLOT_TRY(save_checkpoint(options_.checkpoint_path, state_of(replica, done)));
      }
      return tolerate_peer_failure(transport_.broadcast(nodes, MessageType::kResult, round, std::move(result)), send_failures);
    };
    std::vector<std::uint8_t> result;
    if (setup_.sign_vote()) {
      Decision decision{round, decide(counted, dimension)};
      replica.apply(round, decision.signs);
      result = encode(decision);
    } else {
      BALLOT_ASSIGN_OR_RETURN(auto inputs, robust::InputMatrix::from_rows(gradients));
      // check() passed for n − b and n inputs at setup, so this fails only on a bug of ours.
      BALLOT_ASSIGN_OR_RETURN(auto aggregated, aggregator->aggregate(inputs));
      if (options_.quarantine) {
        for (auto row : aggregated.report.non_finite) {
          std::size_t seen = 0;  // map the row back to its node index
          for (std::size_t i = 0; i < n; ++i) {
            if (votes[i] && seen++ == row) options_.quarantine->report(node_id(i));
          }
        }
      }
      FloatDecision decision{round, std::move(aggregated.value)};
      replica.apply(round, std::span<const float>(decision.direction));
      result = encode(decision);
    }

    const auto every = setup_.options.eval_every;
    if (done == setup_.options.rounds || (every != 0 && done % every == 0)) {
      report.evaluated = true;
      report.test = replica.evaluate(setup_.data->test, setup_.options.eval_examples);
    }
    report.seconds = seconds_since(round_started);
    summary.defences.rejected_messages += report.rejected_messages;
    summary.defences.out_of_sync_votes += report.out_of_sync.size();
    // The round's report (its metrics row) is out before the checkpoint that includes the round:
    // a server killed in between resumes from an earlier checkpoint and redoes the round, whose
    // row then replaces this one; reported after the checkpoint, a kill in between would resume
    // past a round that never got its row.
    if (options_.on_round) options_.on_round(report);
    BALLOT_TRY(checkpoint_then_broadcast(std::move(result)));
  }

  summary.rounds = setup_.options.rounds;
  summary.test = replica.evaluate(setup_.data->test, setup_.data->test.size());
  summary.model_digest = replica.digest();
  if (options_.quarantine) {
    for (std::size_t i = 0; i < n; ++i) {
      if (options_.quarantine->is_quarantined(node_id(i))) summary.defences.quarantined.push_back(i);
      if (const auto events = options_.quarantine->events(node_id(i)); events > 0) {
        summary.defences.misbehaviour.emplace_back(i, events);
      }
      if (const auto late = options_.quarantine->late(node_id(i)); late > 0) summary.defences.late.emplace_back(i, late);
      if (const auto duplicates = options_.quarantine->duplicate_sessions(node_id(i)); duplicates > 0) {
        summary.defences.duplicate_sessions.emplace_back(i, duplicates);
      }
    }
    summary.defences.equivocation_proofs = options_.quarantine->proofs().size();
  }
  // Tell every node to stop; a node that is gone does not matter any more.
  transport_.set_round(setup_.options.rounds);
  (void)transport_.broadcast(nodes, MessageType::kControl, setup_.options.rounds, encode(Finish{summary.rounds}));
  summary.seconds = seconds_since(started);
  return summary;
}

Result<std::deque<transport::Message>> Server::await_joins() {
  // Before the first round, every node gets up to join_wait to connect and send its Join, so
  // that a node whose process came up a moment after the server's is not counted missing in the
  // first round, nor its vote late. Everything else that arrives meanwhile is handed to the first
  // round, in order.
  const std::size_t n = setup_.options.nodes;
  std::vector<bool> joined(n);
  std::deque<transport::Message> held;
  // A quarantined node's messages are dropped unread: nothing to wait for.
  const auto waiting = [&] {
    for (std::size_t i = 0; i < n; ++i) {
      if (!joined[i] && !(options_.quarantine && options_.quarantine->is_quarantined(node_id(i)))) return true;
    }
    return false;
  };
  const auto until = Clock::now() + (options_.join_wait.count() > 0 ? options_.join_wait : options_.round_deadline);
  while (waiting()) {
    const auto now = Clock::now();
    if (now >= until) break;
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - now);
    auto message = transport_.receive(std::min(wait, std::chrono::milliseconds(200)) + std::chrono::milliseconds(1));
    if (!message.ok()) {
      if (message.error().code == ErrorCode::kTimeout) continue;
      return std::move(message).error();
    }
    if (message->from != kServerId && message->from <= n && message->type == MessageType::kControl) {
      auto control = decode_control(message->payload);
      if (control.ok() && std::holds_alternative<Join>(*control)) joined[message->from - 1] = true;
      // Forwarded evidence is checked at once (it may quarantine a node not to wait for); one
      // that does not check goes on to the first round, which counts it against its sender.
      if (control.ok() && std::holds_alternative<Evidence>(*control) && accept_evidence(std::get<Evidence>(*control).proof)) continue;
    }
    // Bounded like the inbox it was taken from: a few messages per node are all an honest
    // cluster sends before its first round (Joins, a vote of the run before a restart).
    if (held.size() >= 16 * n) continue;
    held.push_back(std::move(*message));
  }
  return held;
}

bool Server::accept_evidence(const transport::EquivocationProof& proof) const {
  const auto author = proof.first.header.sender;
  if (!options_.registry || proof.first.header.job != setup_.options.job || author == kServerId ||
      author > setup_.options.nodes || !transport::check_equivocation_proof(proof, *options_.registry).ok()) {
    return false;
  }
  if (options_.quarantine && !options_.quarantine->is_quarantined(author)) options_.quarantine->on_equivocation(proof);
  return true;
}

bool Server::inputs_valid(std::size_t voter, std::uint64_t round,
                          const std::vector<transport::SignedEnvelope>& inputs) const {
  const std::size_t n = setup_.options.nodes;
  for (const auto& envelope : inputs) {
    const auto& h = envelope.header;
    // decode_audited_vote already checked the type and that authors are strictly ascending.
    if (h.job != setup_.options.job || h.round != round || h.role != transport::Role::kNode) return false;
    if (h.sender == kServerId || h.sender > n || !setup_.code.get(voter, h.sender - 1)) return false;
    if (options_.registry) {
      const auto* entry = options_.registry->find(h.sender);
      if (entry == nullptr || entry->role != transport::Role::kNode ||
          !transport::verify_envelope_signature(envelope, entry->key)) {
        return false;
      }
    }
  }
  return true;
}

void Server::audit_inputs(const std::vector<transport::SignedEnvelope>& inputs,
                          std::map<transport::NodeId, transport::SignedEnvelope>& counted,
                          std::set<transport::NodeId>& equivocators) const {
  for (const auto& envelope : inputs) {
    const auto author = envelope.header.sender;
    const auto [it, first] = counted.emplace(author, envelope);
    if (first || it->second.header.payload_digest == envelope.header.payload_digest) continue;
    // Two voters counted different signed inputs of one author in this round: the author sent
    // different signs to different receivers. Once per author and round.
    if (!equivocators.insert(author).second || !options_.quarantine) continue;
    if (options_.quarantine->is_quarantined(author)) continue;  // proven (or excluded) already
    transport::EquivocationProof proof{it->second, envelope};
    if (options_.registry && transport::check_equivocation_proof(proof, *options_.registry).ok()) {
      options_.quarantine->on_equivocation(proof);
    } else {
      options_.quarantine->report(author);
    }
  }
}

Node::Node(const TrainingSetup& setup, std::size_t node_index, transport::Transport& transport,
           NodeOptions options)
    : setup_(setup), index_(node_index), transport_(transport), options_(options) {}

std::filesystem::path node_state_path(const std::filesystem::path& dir, std::size_t index) {
  return dir / ("node-" + std::to_string(index) + ".state");
}

std::filesystem::path signed_record_path(const std::filesystem::path& dir, std::size_t index) {
  return dir / ("node-" + std::to_string(index) + ".signed");
}

Result<std::optional<transport::OutboundFrame>> Node::seal_once(MessageType type, std::uint64_t round,
                                                                 std::shared_ptr<const std::vector<std::uint8_t>> payload) {
  return record_->seal_once(type, round, std::move(payload), [&](MessageType t, std::uint64_t r, auto p) {
    return transport_.seal(t, r, std::move(p));
  });
}

Result<NodeSummary> Node::run() {
  BALLOT_ASSIGN_OR_RETURN(Replica replica, Replica::create(setup_));
  {
    // Rewinds reach back at most one checkpoint interval (the server resumes from its latest).
    const transport::RegistryEntry* self = options_.registry ? options_.registry->find(node_id(index_)) : nullptr;
    BALLOT_ASSIGN_OR_RETURN(auto record, SignedRecord::open(options_.state_dir.empty() ? std::filesystem::path()
                                                                : signed_record_path(options_.state_dir, index_),
                                                            node_id(index_), setup_.options.job,
                                                            self ? &self->key : nullptr, 2 * options_.state_every + 64));
    record_.emplace(std::move(record));
  }
  NodeWorker worker(setup_, index_);
  const std::size_t dimension = replica.dimension();
  NodeSummary summary;
  const bool byzantine = setup_.is_byzantine(index_);
  // An omniscient attacker's view of the honest messages: shared with the other attackers of
  // this process when the caller provides one (the simulator), else its own.
  std::shared_ptr<Coalition> coalition = options_.coalition;
  if (byzantine && needs_honest_view(setup_) && !coalition) coalition = std::make_shared<Coalition>(setup_);
  if (!byzantine || !needs_honest_view(setup_)) coalition.reset();
  std::uint64_t round = 0;  // the next round this node's replica will apply
  std::uint64_t send_failures = 0;
  bool started = false;
  BALLOT_TRY(tolerate_peer_failure(transport_.send(kServerId, MessageType::kControl, round, encode(Join{round})), send_failures));
  auto last_heard = Clock::now();
  BitVector vote_signs;
  std::vector<float> gradient;
  std::unique_ptr<coding::Codec> codec;  // gradient path: this node's codec (and its EF memory)
  if (!setup_.sign_vote()) {
    BALLOT_ASSIGN_OR_RETURN(codec, coding::make_codec(setup_.options.codec));
  }
  std::optional<std::vector<std::uint8_t>> last_vote;
  std::uint64_t last_vote_round = 0;
  std::optional<transport::OutboundFrame> previous_frame;  // the replay attack's material

  // ---- node state (NodeOptions::state_dir): the last saved snapshot, from the file at start.
  const auto state_path = options_.state_dir.empty() ? std::filesystem::path() : node_state_path(options_.state_dir, index_);
  std::optional<Checkpoint> saved_state;
  if (!state_path.empty()) {
    if (auto loaded = load_checkpoint(state_path); loaded.ok()) {
      saved_state = std::move(*loaded);
    } else if (loaded.error().code != ErrorCode::kNotFound) {
      // A damaged file loses the saved state, not the run: the node continues as a fresh one.
      std::fprintf(stderr, "node %zu: ignoring its state file: %s\n", index_, loaded.error().to_string().c_str());
    }
  }
  const auto save_node_state = [&]() -> Status {
    Checkpoint state;
    state.round = round;
    state.sections["worker"] = worker.save_state();
    if (codec && codec->stateful()) state.sections["codec"] = codec->save_state();
    BALLOT_TRY(save_checkpoint(state_path, state));
    saved_state = std::move(state);
    return {};
  };
  // After a state transfer to round `at`: the saved state of exactly that round, if there is one.
  const auto restore_node_state = [&](std::uint64_t at) -> Status {
    if (!saved_state || saved_state->round != at) return {};
    const auto& sections = saved_state->sections;
    if (auto it = sections.find("worker"); it != sections.end()) BALLOT_TRY(worker.load_state(it->second, dimension));
    if (auto it = sections.find("codec"); codec && it != sections.end()) {
      BALLOT_TRY(codec->load_state(it->second, replica.model().layout()));
    }
    ++summary.states_restored;
    return {};
  };
  // A Byzantine node's protocol-domain behaviour of a round, else null.
  const auto protocol_attack = [&](std::uint64_t r) -> const attacks::Behaviour* {
    return byzantine ? setup_.active(attacks::Domain::kProtocol, r) : nullptr;
  };
  const auto crashed = [&](std::uint64_t r) {
    const auto* attack = protocol_attack(r);
    return attack != nullptr && attack->kind == attacks::AttackKind::kCrash;
  };

  // ---- exchange placement: this node's partition goes to its column, its vote is over its row.
  const bool exchange = setup_.options.placement == Placement::kExchange && setup_.sign_vote();
  const auto row = setup_.code.row(index_);
  const auto column = setup_.code.column(index_);
  const auto in_row = [&](std::size_t source) { return source < setup_.options.nodes && setup_.code.get(index_, source); };
  struct Input {
    std::uint32_t source = 0;
    Vote signs;  // the partition-signs payload (Vote layout)
    transport::SignedEnvelope envelope;
  };
  struct PendingVote {
    bool active = false;
    std::uint64_t round = 0;
    RoundStart start;
    Clock::time_point deadline;
    std::vector<Input> inputs;  // at most two per source: a second different one is equivocation
  } pending;
  // Inputs that arrived before their round started here (another node got the round start
  // first): at most two per source of the row and round, for this round and the next only.
  std::map<std::uint64_t, std::vector<transport::Message>> early;
  const auto take_input = [&](transport::Message& input) {
    const std::size_t source = input.from - 1;
    auto signs = decode_vote(input.payload, dimension);
    if (!signs.ok() || signs->round != input.round || signs->model_digest != pending.start.model_digest ||
        !input.envelope) {
      ++summary.inputs_rejected;
      return;
    }
    std::size_t held_from_source = 0;
    for (const auto& held : pending.inputs) {
      if (held.source != source) continue;
      if (held.envelope.header.payload_digest == input.envelope->header.payload_digest) return;  // a repeat
      ++held_from_source;
    }
    if (held_from_source >= 2) return;  // already equivocating: two are enough to exclude it
    pending.inputs.push_back(Input{static_cast<std::uint32_t>(source), std::move(*signs), *input.envelope});
  };
  const auto inputs_complete = [&] {
    for (auto source : row) {
      if (std::none_of(pending.inputs.begin(), pending.inputs.end(),
                       [&](const Input& held) { return held.source == source; })) {
        return false;
      }
    }
    return true;
  };

  // Exchange: votes over the inputs held once all of the row arrived or the input deadline passed.
  const auto finish_exchange_vote = [&]() -> Status {
    if (!pending.active || (!inputs_complete() && Clock::now() < pending.deadline)) return {};
    pending.active = false;
    std::vector<coding::ExchangeInput> inputs;
    for (const auto& input : pending.inputs) inputs.push_back({input.source, &input.signs.signs});
    auto elected = coding::encode_exchange(setup_.code, index_, dimension, inputs);
    summary.inputs_missing += elected.missing.size();
    summary.inputs_rejected += elected.rejected.size();
    AuditedVote vote{.vote = Vote{.round = pending.round, .model_digest = pending.start.model_digest,
                                  .signs = std::move(elected.vote)}};
    double loss = 0;
    for (auto source : elected.counted) {
      // The counted input of each source is its only one (equivocating sources are not counted).
      const auto it = std::find_if(pending.inputs.begin(), pending.inputs.end(),
                                   [&](const Input& held) { return held.source == source; });
      loss += it->signs.loss;
      vote.inputs.push_back(it->envelope);
    }
    vote.vote.loss = elected.counted.empty() ? 0.0 : loss / static_cast<double>(elected.counted.size());
    if (byzantine) {
      const RoundView* view = coalition ? coalition->view(replica, round).get() : nullptr;
      byzantine_vote(setup_, view, index_, round, vote.vote.signs);
    }
    if (protocol_attack(round) && protocol_attack(round)->kind == attacks::AttackKind::kWrongDigest) {
      vote.vote.model_digest[0] ^= 0x01;
    }
    last_vote = encode(vote);
    last_vote_round = round;
    BALLOT_TRY(send_vote(pending.start, *last_vote, previous_frame, send_failures));
    ++summary.votes_sent;
    return {};
  };

  std::size_t forwarded = 0;  // evidence proofs already sent to the server
  // Nothing usable from the server for two round deadlines (it paused, its session was dropped,
  // or what it sent meanwhile is for rounds its transport no longer accepts): ask to rejoin. The
  // server answers a Join with the state and the current round's start.
  auto rejoin_after = std::max(options_.join_retry, std::chrono::milliseconds(2 * 3000));
  auto last_rejoin = Clock::now();
  while (true) {
    if (options_.evidence) {
      const auto proofs = options_.evidence->proofs();
      for (; forwarded < proofs.size(); ++forwarded) {
        BALLOT_TRY(tolerate_peer_failure(transport_.send(kServerId, MessageType::kControl, round,
                                                         encode(Evidence{proofs[forwarded]})), send_failures));
      }
    }
    auto timeout = started ? std::min(options_.idle_timeout, rejoin_after) : options_.join_retry;
    if (pending.active) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(pending.deadline - Clock::now());
      timeout = std::clamp(left + std::chrono::milliseconds(1), std::chrono::milliseconds(1), timeout);
    }
    auto message = transport_.receive(timeout);
    if (!message.ok()) {
      if (message.error().code != ErrorCode::kTimeout) return std::move(message).error();
      BALLOT_TRY(finish_exchange_vote());
      if (Clock::now() - last_heard >= options_.idle_timeout) {
        return make_error(ErrorCode::kTimeout, "node " + std::to_string(index_) + ": no message from the server");
      }
      const auto now = Clock::now();
      if (!started || (now - last_heard >= rejoin_after && now - last_rejoin >= rejoin_after)) {
        last_rejoin = now;
        BALLOT_TRY(tolerate_peer_failure(transport_.send(kServerId, MessageType::kControl, round, encode(Join{round})), send_failures));
      }
      continue;
    }
    if (message->from != kServerId) {
      // Nodes talk to nodes only in exchange placement, and only to send partition signs.
      if (!exchange || message->type != MessageType::kGradient || message->from > setup_.options.nodes ||
          !in_row(message->from - 1) || crashed(message->round)) {
        continue;
      }
      if (pending.active && message->round == pending.round) {
        take_input(*message);
        BALLOT_TRY(finish_exchange_vote());
      } else if ((message->round == round || message->round == round + 1) &&
                 !(last_vote && last_vote_round == message->round)) {
        // At most two per source and round (a second, different one is equivocation), so that a
        // source repeating itself cannot crowd out the others' inputs.
        auto& held = early[message->round];
        const auto from_source = std::count_if(held.begin(), held.end(), [&](const transport::Message& other) {
          return other.from == message->from;
        });
        if (from_source < 2) held.push_back(std::move(*message));
      }
      continue;
    }
    last_heard = Clock::now();
    // Crash attack: silent while active. Without an end round the node is gone for good (the
    // process exits); with one it comes back behind and rejoins through the state transfer.
    if (message->type != MessageType::kControl && crashed(message->round)) {
      if (setup_.attack.find(attacks::Domain::kProtocol)->last_round == std::numeric_limits<std::uint64_t>::max()) {
        summary.model_digest = replica.digest();
        summary.crashed = true;
        summary.abstained = record_->abstained();
        return summary;
      }
      // Down, but the restarted process will learn the round it is in: follow the round window
      // so that the first round start after the crash is accepted and triggers the rejoin.
      if (message->type == MessageType::kRoundStart) transport_.set_round(message->round);
      continue;
    }
    switch (message->type) {
      case MessageType::kCheckpoint: {
        auto checkpoint = decode_checkpoint(message->payload);
        if (!checkpoint.ok()) continue;
        if (replica.restore_from(*checkpoint).ok()) {
          const bool moved = checkpoint->round != round;
          round = checkpoint->round;
          // The node's own state of that round, when it saved one (not when the transfer only
          // re-synchronised the round it is in: its state there is already current).
          if (moved) {
            if (auto restored = restore_node_state(round); !restored.ok()) {
              std::fprintf(stderr, "node %zu: its state of round %llu does not fit: %s\n", index_,
                           static_cast<unsigned long long>(round), restored.error().to_string().c_str());
            }
          }
          transport_.reset_round(round);  // the server may have resumed from an older round
          // The state of a round this node already voted in (the server found its vote on another
          // model): that vote stands. Voting again would advance the worker momentum twice and
          // send a second, different vote for the round — equivocation.
          if (!(last_vote && last_vote_round == round)) last_vote.reset();
          pending.active = false;
          early.clear();
          ++summary.rejoins;
          BALLOT_TRY(tolerate_peer_failure(transport_.send(kServerId, MessageType::kControl, round, encode(Join{round})), send_failures));
        }
        break;
      }
      case MessageType::kRoundStart: {
        auto start = decode_round_start(message->payload);
        if (!start.ok() || start->round != message->round || start->round < round) continue;
        started = true;
        rejoin_after = std::max(options_.join_retry, std::chrono::milliseconds(2 * std::uint64_t{start->deadline_ms}));
        if (start->round > round || start->model_digest != replica.digest()) {
          // Behind (restarted, or missed a decision) or diverged: ask for the current state.
          BALLOT_TRY(tolerate_peer_failure(transport_.send(kServerId, MessageType::kControl, round, encode(Join{round})), send_failures));
          continue;
        }
        if (exchange) {
          // A repeated start (the server answers every Join with the round's start) of a round in
          // progress or already voted changes nothing: the vote goes out once. Re-sent after the
          // inputs' wait it would often reach the server after it decided the round, as a stale
          // frame counted against this node. Otherwise: this round's partition to the column.
          if (pending.active && pending.round == round) continue;
          if (last_vote && last_vote_round == round) continue;
          BALLOT_ASSIGN_OR_RETURN(auto own, send_partition_signs(*start, worker, replica, column, send_failures));
          // Within the round deadline, so that the vote still counts at the server.
          const double fraction = std::clamp(options_.exchange_input_fraction, 0.0, 1.0);
          const auto wait = std::chrono::duration<double, std::milli>(fraction * static_cast<double>(start->deadline_ms));
          pending = PendingVote{true, round, *start,
                                Clock::now() + std::chrono::duration_cast<Clock::duration>(wait), {}};
          // Its own input is handled here, without the network.
          if (in_row(index_) && own) {
            pending.inputs.push_back(Input{static_cast<std::uint32_t>(index_), std::move(own->first), own->second});
          }
          if (auto it = early.find(round); it != early.end()) {
            for (auto& input : it->second) take_input(input);
          }
          early.erase(early.begin(), early.upper_bound(round));
          BALLOT_TRY(finish_exchange_vote());
          continue;
        }
        // A repeated start (the server answers every Join with the round's start, and a starting
        // node may have sent several) of a round already voted changes nothing: the vote goes out
        // once, as in exchange. Computing it again would advance the worker momentum twice and
        // make the node equivocate; re-sending it would reach the server after it decided.
        if (last_vote && last_vote_round == round) continue;
        const RoundView* view = coalition ? coalition->view(replica, round).get() : nullptr;
        if (setup_.sign_vote()) {
          Vote vote;
          vote.round = round;
          vote.model_digest = start->model_digest;
          vote.loss = worker.vote(replica, round, vote_signs);
          if (byzantine) byzantine_vote(setup_, view, index_, round, vote_signs);
          vote.signs = vote_signs;
          if (protocol_attack(round) && protocol_attack(round)->kind == attacks::AttackKind::kWrongDigest) {
            vote.model_digest[0] ^= 0x01;
          }
          last_vote = encode(vote);
        } else {
          EncodedVote vote;
          vote.round = round;
          vote.model_digest = start->model_digest;
          vote.loss = worker.gradient(replica, round, gradient);
          if (byzantine) byzantine_gradient(setup_, view, index_, round, gradient);
          Rng rng = codec_rng(setup_, round, index_);
          vote.bytes = codec->encode(gradient, replica.model().layout(), rng).bytes;
          if (protocol_attack(round) && protocol_attack(round)->kind == attacks::AttackKind::kWrongDigest) {
            vote.model_digest[0] ^= 0x01;
          }
          last_vote = encode(vote);
        }
        last_vote_round = round;
        BALLOT_TRY(send_vote(*start, *last_vote, previous_frame, send_failures));
        ++summary.votes_sent;
        break;
      }
      case MessageType::kResult: {
        if (message->round != round) continue;
        pending.active = false;  // decided without this node's vote: it would come too late
        if (setup_.sign_vote()) {
          auto decision = decode_decision(message->payload, dimension);
          if (!decision.ok() || decision->round != round) continue;
          replica.apply(round, decision->signs);
        } else {
          auto decision = decode_float_decision(message->payload, dimension);
          if (!decision.ok() || decision->round != round) continue;
          replica.apply(round, std::span<const float>(decision->direction));
        }
        ++round;
        ++summary.rounds;
        transport_.set_round(round);
        if (!state_path.empty() && options_.state_every > 0 && round % options_.state_every == 0) {
          // A full disk or a lost directory costs the node its restart state, not the run.
          if (auto saved = save_node_state(); !saved.ok()) {
            std::fprintf(stderr, "node %zu: %s\n", index_, saved.error().to_string().c_str());
          }
        }
        break;
      }
      case MessageType::kControl: {
        auto control = decode_control(message->payload);
        if (control.ok() && std::holds_alternative<Finish>(*control)) {
          summary.model_digest = replica.digest();
          summary.abstained = record_->abstained();
          return summary;
        }
        break;
      }
      default:
        break;
    }
  }
}

Result<std::optional<std::pair<Vote, transport::SignedEnvelope>>> Node::send_partition_signs(
    const RoundStart& start, NodeWorker& worker, Replica& replica, const std::vector<std::uint32_t>& column,
    std::uint64_t& send_failures) {
  using attacks::AttackKind;
  const std::uint64_t round = start.round;
  Vote signs;
  signs.round = round;
  signs.model_digest = start.model_digest;
  // Partition `index_` of round `round` with its worker momentum: what every node of the column
  // would compute for it in the replicated placement. A label-flipping attacker flips here.
  signs.loss = worker.partition_signs(replica, round, static_cast<std::uint32_t>(index_), signs.signs);
  auto payload = std::make_shared<const std::vector<std::uint8_t>>(encode(signs));
  BALLOT_ASSIGN_OR_RETURN(auto sealed, seal_once(MessageType::kGradient, round, payload));
  // It signed other signs for this round before (a restart or rewind lost the state it had):
  // its input abstains rather than contradict what its column may already hold.
  if (!sealed) return std::optional<std::pair<Vote, transport::SignedEnvelope>>();
  transport::OutboundFrame frame = std::move(*sealed);
  transport::SignedEnvelope envelope;
  if (frame.head.size() == transport::kFrameHeaderSize + transport::kEnvelopeMetaSize) {
    auto decoded = transport::decode_envelope(std::span<const std::uint8_t>(frame.head).subspan(transport::kFrameHeaderSize));
    if (decoded.ok()) envelope = *decoded;
  }
  const auto* attack = setup_.is_byzantine(index_) ? setup_.active(attacks::Domain::kProtocol, round) : nullptr;
  if (attack != nullptr && attack->kind == AttackKind::kOmission && omits_vote(setup_, index_, round)) {
    return std::optional<std::pair<Vote, transport::SignedEnvelope>>();  // nothing sent, nothing held
  }
  // The natural equivocation of this placement: every other receiver of the column gets signs
  // that differ in one coordinate, under a second signature for the same round (caught by the
  // server across votes); the first receiver gets both (caught by its verifier).
  std::optional<transport::OutboundFrame> other;
  if (attack != nullptr && attack->kind == AttackKind::kEquivocation) {
    Vote lie = signs;
    lie.signs.set(0, !lie.signs.get(0));
    other = transport_.seal(MessageType::kGradient, round, std::make_shared<const std::vector<std::uint8_t>>(encode(lie)));
  }
  std::size_t sent = 0;
  for (auto receiver : column) {
    if (receiver == index_) continue;
    auto status = transport_.send_frame(node_id(receiver), other && sent % 2 == 1 ? *other : frame);
    BALLOT_TRY(tolerate_peer_failure(std::move(status), send_failures));
    // The first receiver gets both: its own verifier holds the proof (forwarded as Evidence).
    if (other && sent == 0) BALLOT_TRY(tolerate_peer_failure(transport_.send_frame(node_id(receiver), *other), send_failures));
    ++sent;
  }
  return std::optional<std::pair<Vote, transport::SignedEnvelope>>(std::in_place, std::move(signs), envelope);
}

Status Node::send_vote(const RoundStart& start, const std::vector<std::uint8_t>& vote,
                       std::optional<transport::OutboundFrame>& previous, std::uint64_t& send_failures) {
  using attacks::AttackKind;
  const std::uint64_t round = start.round;
  const auto* attack = setup_.is_byzantine(index_) ? setup_.active(attacks::Domain::kProtocol, round) : nullptr;
  auto payload = std::make_shared<const std::vector<std::uint8_t>>(vote);
  BALLOT_ASSIGN_OR_RETURN(auto sealed, seal_once(MessageType::kVote, round, payload));
  if (!sealed) return {};  // it signed another vote for this round before: abstain
  transport::OutboundFrame frame = std::move(*sealed);
  const auto send = [&](transport::OutboundFrame f) {
    return tolerate_peer_failure(transport_.send_frame(kServerId, std::move(f)), send_failures);
  };
  // The replay attack sends last round's signed vote; every round's own vote is kept for it.
  std::optional<transport::OutboundFrame> replayed = std::move(previous);
  previous = frame;
  if (attack == nullptr) return send(std::move(frame));
  Rng rng(setup_.options.seed, Rng::stream_id({round, index_, 0x70726f746f636f6cULL /* "protocol" */}));
  switch (attack->kind) {
    case AttackKind::kOmission:
      if (omits_vote(setup_, index_, round)) return {};
      return send(std::move(frame));
    case AttackKind::kDelay: {
      // Past the deadline by default: the vote arrives when the server has moved on.
      const auto delay = attack->delay_ms != 0 ? std::chrono::milliseconds(attack->delay_ms)
                                               : 2 * std::chrono::milliseconds(start.deadline_ms);
      std::this_thread::sleep_for(delay);
      return send(std::move(frame));
    }
    case AttackKind::kEquivocation: {
      // Exchange placement: the partition signs equivocate (send_partition_signs); the vote is one.
      if (setup_.options.placement == Placement::kExchange) return send(std::move(frame));
      // The vote, then a different one for the same round: the receiver's verifier holds both
      // signed digests, which is a self-contained proof.
      BALLOT_TRY(send(frame));
      auto other = std::make_shared<std::vector<std::uint8_t>>(vote);
      other->back() ^= 0x01;
      return send(transport_.seal(MessageType::kVote, round, std::move(other)));
    }
    case AttackKind::kReplay: {
      // Last round's signed vote instead of this round's.
      if (!replayed) return {};
      return send(std::move(*replayed));
    }
    case AttackKind::kForgedSignature:
      return send(attacks::forge_signature(std::move(frame)));
    case AttackKind::kMalformedFrame:
      return send(attacks::malformed_frame(rng));
    case AttackKind::kOversizedFrame:
      return send(attacks::oversized_frame(MessageType::kVote, std::uint64_t{1} << 40));
    case AttackKind::kWrongDigest:  // the digest is already wrong in the payload
    case AttackKind::kCrash:        // handled by the receive loop
    default:
      return send(std::move(frame));
  }
}

}  // namespace ballot::runtime

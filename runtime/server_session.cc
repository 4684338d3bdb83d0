#include "runtime/server_session.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>

#include "coding/codec_registry.h"
#include "coding/global_topk.h"
#include "robust/registry.h"
#include "robust/sparse_inputs.h"
#include "runtime/checkpoint.h"
#include "runtime/detail/peer_failure.h"
#include "runtime/messages.h"
#include "runtime/replica.h"

namespace ballot::runtime {
namespace {

using Clock = SessionClock;
using transport::MessageType;

using detail::tolerate_peer_failure;

}  // namespace

struct ServerSession::State {
  struct Received {  // what the server holds from node i in a round
    double loss = 0;
    BitVector signs;                 // sign path
    std::vector<float> gradient;     // gradient path, decoded
    coding::SparseGradient entries;  // gradient path, a sparsifying codec: the decoded entries
  };

  State(const TrainingSetup& s, transport::Transport& t, Replica& r, ServerSessionOptions o)
      : setup(s),
        transport(t),
        replica(r),
        options(std::move(o)),
        clock(options.clock ? options.clock : steady_session_clock()),
        n(s.options.nodes),
        quorum(s.options.nodes - s.options.byzantine),
        exchange(s.options.placement == Placement::kExchange && s.sign_vote()),
        decision_resent(n),
        votes(n),
        pieces(n),
        state_sent(n),
        heard(n),
        missed(n) {
    for (std::size_t i = 0; i < n; ++i) nodes.push_back(node_id(i));
  }

  bool quarantined(transport::NodeId id) const { return options.quarantine && options.quarantine->is_quarantined(id); }
  Status tolerate(Status status) { return tolerate_peer_failure(std::move(status), send_failures); }
  // `resumed`: the state a restarted server sends first (messages.h kResumedSection): votes sent
  // to the process before it are lost, and nodes that voted in this round send theirs again.
  std::vector<std::uint8_t> state_payload(bool resumed = false) const {
    Checkpoint checkpoint;
    checkpoint.round = round;
    replica.save_to(checkpoint);
    if (resumed) checkpoint.sections[std::string(kResumedSection)] = {1};
    return encode_checkpoint(checkpoint);
  }
  Status send_state_and_start(transport::NodeId to, bool with_state) {
    if (with_state) BALLOT_TRY(tolerate(transport.send(to, MessageType::kStateTransfer, round, state_payload())));
    return tolerate(transport.send(to, MessageType::kRoundStart, round, encode(start)));
  }

  Status handle(transport::Message& message);
  Status on_control(const transport::Message& message);
  Status on_decision_request(std::size_t index, const DecisionRequest& request);
  Status on_vote(transport::Message& message);
  Status on_vote_piece(const transport::Message& message);
  // A decoded vote of node `index` for this round: checked against the round's state digest and
  // kept (`bytes`: its payload size).
  Status accept_vote(std::size_t index, Received vote, const transport::Digest& digest, std::uint64_t bytes);
  void reject(transport::NodeId from) {
    ++report.rejected_messages;
    if (options.quarantine) options.quarantine->report(from);
  }
  bool accept_evidence(const transport::EquivocationProof& proof) const;
  bool inputs_valid(std::size_t voter, const std::vector<transport::SignedEnvelope>& inputs) const;
  void audit_inputs(const std::vector<transport::SignedEnvelope>& inputs);

  const TrainingSetup& setup;
  transport::Transport& transport;
  Replica& replica;
  ServerSessionOptions options;
  std::shared_ptr<SessionClock> clock;
  const std::size_t n;
  const std::size_t quorum;
  const bool exchange;
  std::vector<transport::NodeId> nodes;
  // The gradient path's rule and the codec that validates and decodes what nodes send.
  std::unique_ptr<robust::Aggregator> aggregator;
  std::unique_ptr<coding::Codec> codec;
  // Global top-k (gtopk): the update is the k largest of the rule's output (Shi et al.'s global set).
  std::optional<coding::SparseOptions> global_budget;
  std::size_t max_codec_bytes = 0;
  // Votes kept as their entries (robust/sparse_inputs.h) rather than decoded into d floats: set
  // at start().
  bool keep_entries = false;
  std::uint64_t send_failures = 0;
  std::deque<transport::Message> held;  // arrived while waiting for the Joins: handled first
  // The last decision sent, for nodes that ask for it whole (once per node).
  std::optional<std::uint64_t> decided_round;
  std::vector<std::uint8_t> decided;
  std::vector<bool> decision_resent;
  // The decision decide() made and the replica has not applied yet (apply_decision()).
  std::optional<Decision> pending_signs;
  std::optional<FloatDecision> pending_direction;

  void apply_pending() {
    if (pending_signs) {
      replica.apply(pending_signs->round, pending_signs->signs, pending_signs->scale, pending_signs->full_digest);
      pending_signs.reset();
    }
    if (pending_direction) {
      const FloatDecision& d = *pending_direction;
      if (decided_round == d.round) {
        // Sent: the chain reads the direction's digest off the bytes that went out.
        replica.apply(d.round, std::span<const float>(d.direction), d.scale, d.full_digest, decided);
      } else {
        replica.apply(d.round, std::span<const float>(d.direction), d.scale, d.full_digest);
      }
      pending_direction.reset();
    }
  }

  // ---- the round being run
  std::uint64_t round = 0;
  RoundStart start;
  Clock::time_point started;
  RoundReport report;
  std::vector<std::optional<Received>> votes;
  std::vector<VoteAssembly> pieces;  // votes arriving in pieces (kVotePiece), until complete
  std::size_t received = 0;
  // Nodes sent the state this round: one transfer per node and round, so that a node that keeps
  // voting on another model cannot make the server send the model again and again.
  std::vector<bool> state_sent;
  // Exchange: the first input envelope counted for each author this round (from any vote), and
  // the authors already proven to equivocate this round.
  std::map<transport::NodeId, transport::SignedEnvelope> counted_inputs;
  std::set<transport::NodeId> equivocators;
  // Nodes heard from (any message) in this round, and per node the round since which its votes have
  // not counted and nothing of it was heard: once the quorum is in, collect() waits for it only
  // every kAbsentProbeEvery rounds (skip_absent).
  std::vector<bool> heard;
  std::vector<std::optional<std::uint64_t>> missed;
};

ServerSession::ServerSession(const TrainingSetup& setup, transport::Transport& transport, Replica& replica,
                             ServerSessionOptions options)
    : state_(std::make_unique<State>(setup, transport, replica, std::move(options))) {}

ServerSession::~ServerSession() = default;

RoundReport& ServerSession::report() noexcept { return state_->report; }

Status ServerSession::begin(std::uint64_t first_round) {
  State& s = *state_;
  if (first_round > 0) {
    // Resumed: nodes still running may be ahead of the checkpoint (or behind it); give everyone
    // this state. Each node installs it, rewinds its round window and answers with a Join.
    s.round = first_round;
    s.transport.set_round(first_round);
    BALLOT_TRY(s.tolerate(
        s.transport.broadcast(s.nodes, MessageType::kStateTransfer, first_round, s.state_payload(/*resumed=*/true))));
  }
  // Every node gets up to join_wait to connect and send its Join, so that a node whose process
  // came up a moment after the server's is not counted missing in the first round, nor its vote
  // late. Everything else that arrives meanwhile is handed to the first round, in order.
  std::vector<bool> joined(s.n);
  const auto waiting = [&] {
    for (std::size_t i = 0; i < s.n; ++i) {
      if (!joined[i] && !s.quarantined(node_id(i))) return true;  // a quarantined node's messages are dropped unread
    }
    return false;
  };
  const auto until =
      s.clock->now() + (s.options.join_wait.count() > 0 ? s.options.join_wait : s.options.round_deadline);
  while (waiting()) {
    const auto now = s.clock->now();
    if (now >= until) break;
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - now);
    auto message = s.transport.receive(std::min(wait, std::chrono::milliseconds(200)) + std::chrono::milliseconds(1));
    if (!message.ok()) {
      if (message.error().code == ErrorCode::kTimeout) continue;
      return std::move(message).error();
    }
    if (message->from != kServerId && message->from <= s.n && message->type == MessageType::kControl) {
      auto control = decode_control(message->payload);
      if (control.ok() && std::holds_alternative<Join>(*control)) joined[message->from - 1] = true;
      // Forwarded evidence is checked at once (it may quarantine a node not to wait for); one
      // that does not check goes on to the first round, which counts it against its sender.
      if (control.ok() && std::holds_alternative<Evidence>(*control) &&
          s.accept_evidence(std::get<Evidence>(*control).proof)) {
        continue;
      }
    }
    // Bounded like the inbox it was taken from: a few messages per node are all an honest
    // cluster sends before its first round (Joins, a vote of the run before a restart).
    if (s.held.size() >= 16 * s.n) continue;
    s.held.push_back(std::move(*message));
  }
  if (!s.setup.sign_vote()) {
    BALLOT_ASSIGN_OR_RETURN(s.aggregator, robust::make_aggregator(s.setup.options.rule));
    BALLOT_ASSIGN_OR_RETURN(s.codec, coding::make_codec(s.setup.options.codec));
    s.max_codec_bytes = s.codec->wire_size(s.replica.model().layout());
    // A sparsifying codec's votes stay entries under a coordinate-wise rule, unless a message may
    // list so many that its entries (12 bytes each, at least 4 bytes of message each) would take
    // more memory than its d floats: a threshold codec's message may list every coordinate.
    s.keep_entries = s.codec->sparse_decode() && s.aggregator->coordinate_wise() &&
                     3 * std::uint64_t{s.max_codec_bytes} <= 4 * std::uint64_t{s.replica.dimension()};
    if (const auto* gtopk = dynamic_cast<const coding::GlobalTopKCodec*>(s.codec.get())) {
      s.global_budget = gtopk->options();
    }
  }
  return {};
}

Status ServerSession::open_round(std::uint64_t round) {
  State& s = *state_;
  s.apply_pending();  // the RoundStart carries the state digest after the last decision
  s.started = s.clock->now();
  s.round = round;
  s.transport.set_round(round);
  s.report = RoundReport{};
  s.report.round = round;
  s.report.send_failures = s.send_failures;
  s.report.fp32_bytes = s.replica.dimension() * sizeof(float);
  s.start = RoundStart{round, static_cast<std::uint32_t>(s.options.round_deadline.count()), s.replica.state_digest()};
  std::fill(s.votes.begin(), s.votes.end(), std::nullopt);
  for (auto& assembly : s.pieces) assembly.clear();
  std::fill(s.state_sent.begin(), s.state_sent.end(), false);
  std::fill(s.heard.begin(), s.heard.end(), false);
  s.received = 0;
  s.counted_inputs.clear();
  s.equivocators.clear();
  return s.tolerate(s.transport.broadcast(s.nodes, MessageType::kRoundStart, round, encode(s.start)));
}

Status ServerSession::collect() {
  State& s = *state_;
  const auto deadline = s.started + s.options.round_deadline;
  const auto give_up = deadline + s.options.quorum_timeout;
  // Every node has voted, or is quarantined (its votes would be dropped unread anyway), or is
  // absent while the quorum is in (but in a probe round: every kAbsentProbeEvery rounds since it
  // missed, so that a node whose votes keep arriving just too late is counted again).
  const auto all_in = [&] {
    for (std::size_t i = 0; i < s.n; ++i) {
      const bool absent = s.missed[i] && (s.round - *s.missed[i]) % kAbsentProbeEvery != 0;
      const bool skipped = s.options.skip_absent && absent && s.received >= s.quorum;
      if (!s.votes[i] && !s.quarantined(node_id(i)) && !skipped) return false;
    }
    return true;
  };
  while (!all_in()) {
    const auto now = s.clock->now();
    if (now >= deadline && s.received >= s.quorum) break;
    if (now >= give_up) {
      return make_error(ErrorCode::kTimeout, "round " + std::to_string(s.round) + ": only " +
                                                 std::to_string(s.received) + " of the quorum of " +
                                                 std::to_string(s.quorum) + " votes arrived");
    }
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>((now < deadline ? deadline : give_up) - now);
    Result<transport::Message> message = make_error(ErrorCode::kTimeout, "");
    if (!s.held.empty()) {
      message = std::move(s.held.front());
      s.held.pop_front();
    } else {
      message = s.transport.receive(std::min(wait, std::chrono::milliseconds(200)) + std::chrono::milliseconds(1));
    }
    if (!message.ok()) {
      if (message.error().code == ErrorCode::kTimeout) continue;
      return std::move(message).error();
    }
    BALLOT_TRY(s.handle(*message));
  }
  for (std::size_t i = 0; i < s.n; ++i) {
    if (s.votes[i] || s.heard[i]) {
      s.missed[i].reset();
    } else if (!s.missed[i]) {
      s.missed[i] = s.round;
    }
  }
  return {};
}

Status ServerSession::State::handle(transport::Message& message) {
  if (message.from == kServerId || message.from > n || quarantined(message.from)) {
    ++report.rejected_messages;
    return {};
  }
  heard[message.from - 1] = true;  // waited for again, in this round and the next
  missed[message.from - 1].reset();
  if (message.type == MessageType::kControl) return on_control(message);
  const bool vote = message.type == MessageType::kVote || message.type == MessageType::kVotePiece;
  if (vote && message.round < round) {
    // A vote for a round already decided (sent before the deadline, read after it): late, not
    // malformed. A replay of an old frame is the transport's to catch (sequence window). Of a
    // vote in pieces, piece 0 counts (the others are the same lateness).
    if (message.type == MessageType::kVotePiece) {
      auto piece = decode_vote_piece(message.payload, replica.dimension());
      if (!piece.ok() || piece->index != 0) return {};
    }
    ++report.late_votes;
    if (options.quarantine) options.quarantine->report_late(message.from);
    return {};
  }
  if (!vote || message.round != round) {
    ++report.rejected_messages;
    return {};
  }
  return message.type == MessageType::kVotePiece ? on_vote_piece(message) : on_vote(message);
}

Status ServerSession::State::on_control(const transport::Message& message) {
  auto control = decode_control(message.payload);
  if (control.ok() && std::holds_alternative<Evidence>(*control)) {
    // A node's verifier caught a peer equivocating: checkable here without the payloads.
    if (!accept_evidence(std::get<Evidence>(*control).proof)) {
      ++report.rejected_messages;
      if (options.quarantine) options.quarantine->report(message.from);
    }
    return {};
  }
  if (control.ok() && std::holds_alternative<DecisionRequest>(*control)) {
    return on_decision_request(message.from - 1, std::get<DecisionRequest>(*control));
  }
  if (!control.ok() || !std::holds_alternative<Join>(*control)) {
    ++report.rejected_messages;
    return {};
  }
  // A (re)starting node: a node at another round (behind, or ahead of a resumed server) gets the
  // state before this round, once per round (a node cut off from the server re-sends its Join
  // every two deadlines, and its transport delivers all of them when the link returns: each would
  // cost a copy of the whole model); every joining node gets this round's start (it may have
  // connected after the broadcast).
  // A node at the server's round on another state (its parameters diverged) gets it too.
  const std::size_t index = message.from - 1;
  const Join& join = std::get<Join>(*control);
  const bool with_state = (join.round != round || join.state_digest != start.model_digest) && !state_sent[index];
  if (with_state) state_sent[index] = true;
  return send_state_and_start(message.from, with_state);
}

Status ServerSession::State::on_vote(transport::Message& message) {
  const std::size_t index = message.from - 1;
  const std::size_t dimension = replica.dimension();
  // Decode and validate: any failure drops the message and counts against the sender.
  std::optional<Received> accepted;
  transport::Digest vote_digest{};
  if (exchange) {
    if (auto vote = decode_audited_vote(message.payload, dimension, n);
        vote.ok() && vote->vote.round == round && inputs_valid(index, vote->inputs)) {
      audit_inputs(vote->inputs);
      vote_digest = vote->vote.model_digest;
      accepted = Received{vote->vote.loss, std::move(vote->vote.signs), {}};
    }
  } else if (setup.sign_vote()) {
    if (auto vote = decode_vote(message.payload, dimension); vote.ok() && vote->round == round) {
      vote_digest = vote->model_digest;
      accepted = Received{vote->loss, std::move(vote->signs), {}};
    }
  } else if (auto vote = decode_encoded_vote(message.payload, max_codec_bytes); vote.ok() && vote->round == round) {
    // For a coordinate-wise rule, a sparsifying codec's message stays a list of entries: no d
    // floats per node.
    const auto& layout = replica.model().layout();
    if (keep_entries) {
      if (auto entries = codec->decode_entries(vote->bytes, layout); entries.ok()) {
        vote_digest = vote->model_digest;
        accepted = Received{vote->loss, {}, {}, std::move(*entries)};
      }
    } else if (auto gradient = codec->decode(vote->bytes, layout); gradient.ok()) {
      vote_digest = vote->model_digest;
      accepted = Received{vote->loss, {}, std::move(*gradient)};
    }
  }
  if (!accepted) {
    reject(message.from);
    return {};
  }
  return accept_vote(index, std::move(*accepted), vote_digest, message.payload.size());
}

// Pieces are for the replicated sign path only. A piece that does not decode, or that contradicts
// the pieces held (another head, another content for one index: the node signed both), is
// rejected and counts against the sender; the pieces held stay, and the vote counts once whole.
Status ServerSession::State::on_vote_piece(const transport::Message& message) {
  const std::size_t index = message.from - 1;
  if (exchange || !setup.sign_vote()) {
    reject(message.from);
    return {};
  }
  auto piece = decode_vote_piece(message.payload, replica.dimension());
  if (!piece.ok() || piece->round != round) {
    reject(message.from);
    return {};
  }
  if (votes[index]) return {};  // its vote is in (whole or from pieces): nothing more to count
  auto vote = pieces[index].add(*piece);
  if (!vote.ok()) {
    reject(message.from);
    return {};
  }
  if (!*vote) return {};
  const std::uint64_t bytes = pieces[index].bytes();
  pieces[index].clear();
  const transport::Digest digest = (*vote)->model_digest;
  return accept_vote(index, Received{(*vote)->loss, std::move((*vote)->signs), {}}, digest, bytes);
}

Status ServerSession::State::accept_vote(std::size_t index, Received vote, const transport::Digest& vote_digest,
                                         std::uint64_t bytes) {
  const transport::NodeId from = node_id(index);
  if (vote_digest != start.model_digest) {
    // A node that restarted, paused or missed a decision is out of sync and gets the state (once
    // per round: one that keeps voting on another model costs one transfer a round). Stale state
    // is lateness, not evidence (runtime/quarantine.h).
    if (options.quarantine) options.quarantine->report_late(from);
    report.out_of_sync.push_back(index);
    if (!state_sent[index]) {
      state_sent[index] = true;
      BALLOT_TRY(send_state_and_start(from, true));
    }
    return {};
  }
  report.bytes_per_vote = bytes;
  if (!votes[index]) ++received;
  votes[index] = std::move(vote);
  return {};
}

Result<std::vector<std::uint8_t>> ServerSession::decide() {
  State& s = *state_;
  RoundReport& report = s.report;
  report.vote_wait_seconds = std::chrono::duration<double>(s.clock->now() - s.started).count();
  std::vector<const BitVector*> counted;
  std::vector<std::span<const float>> gradients;
  std::vector<robust::SparseRow> entries;
  FiniteLossMean loss;  // a finite but wild value still moves it, as any mean
  for (std::size_t i = 0; i < s.n; ++i) {
    if (s.votes[i]) {
      counted.push_back(&s.votes[i]->signs);
      gradients.emplace_back(s.votes[i]->gradient);
      entries.push_back({s.votes[i]->entries.indices, s.votes[i]->entries.values});
      loss.add(s.votes[i]->loss);
    } else {
      report.missing.push_back(i);
    }
  }
  report.votes = counted.size();
  if (s.options.quarantine) {
    for (auto id : s.options.quarantine->quarantined()) {
      if (id != kServerId && id <= s.n) report.quarantined.push_back(id - 1);
    }
  }
  report.mean_loss = counted.empty() ? 0.0 : loss.value();
  if (s.setup.sign_vote()) {
    // The round's scale is computed here, once, and travels in the signed decision.
    Decision decision{s.round, s.replica.scale(s.round), s.replica.full_digest_after(s.round),
                      runtime::decide(counted, s.replica.dimension())};
    auto encoded = encode(decision);
    s.pending_signs = std::move(decision);
    report.bytes_per_decision = encoded.size();
    return encoded;
  }
  // check() passed for n − b and n inputs at setup, so this fails only on a bug of ours. Entries
  // aggregate to what their dense vectors would, bit for bit (robust/sparse_inputs.h).
  auto aggregate = [&]() -> Result<robust::AggregationResult> {
    if (s.keep_entries) return robust::aggregate_sparse(*s.aggregator, entries, s.replica.dimension());
    BALLOT_ASSIGN_OR_RETURN(auto inputs, robust::InputMatrix::from_rows(gradients));
    return s.aggregator->aggregate(inputs);
  };
  BALLOT_ASSIGN_OR_RETURN(auto aggregated, aggregate());
  if (s.options.quarantine) {
    for (auto row : aggregated.report.non_finite) {
      std::size_t seen = 0;  // map the row back to its node index
      for (std::size_t i = 0; i < s.n; ++i) {
        if (s.votes[i] && seen++ == row) s.options.quarantine->report(node_id(i));
      }
    }
  }
  if (s.global_budget) coding::keep_global_top_k(aggregated.value, s.replica.model().layout(), *s.global_budget);
  FloatDecision decision{s.round, s.replica.scale(s.round), s.replica.full_digest_after(s.round),
                         std::move(aggregated.value)};
  auto encoded = encode(decision);
  s.pending_direction = std::move(decision);
  report.bytes_per_decision = encoded.size();
  return encoded;
}

Status ServerSession::send_decision(std::vector<std::uint8_t> decision) {
  State& s = *state_;
  s.decided_round = s.round;
  s.decided = std::move(decision);
  std::fill(s.decision_resent.begin(), s.decision_resent.end(), false);
  // The last decision goes to every node whole: after it the server stops answering requests.
  std::vector<std::size_t> relays;
  if (s.options.relay_decisions && s.round + 1 < s.setup.options.rounds) {
    for (std::size_t i = 0; i < s.n; ++i) {
      if (s.votes[i] && !s.quarantined(node_id(i))) relays.push_back(i);
    }
  }
  if (relays.size() < 2) return s.tolerate(s.transport.broadcast(s.nodes, MessageType::kDecision, s.round, s.decided));
  const auto pieces = cut_decision(s.round, s.decided, static_cast<std::uint32_t>(relays.size()));
  Status status;
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    auto sent =
        s.tolerate(s.transport.send(node_id(relays[k]), MessageType::kDecisionPiece, s.round, encode(pieces[k])));
    if (status.ok() && !sent.ok()) status = std::move(sent);
  }
  return status;
}

// A node that did not get every piece of the last decision (a relay withheld its piece, or it
// was not in time for the round) gets the decision whole, once per decision: a node that keeps
// asking costs one decision a round, as without relays.
Status ServerSession::State::on_decision_request(std::size_t index, const DecisionRequest& request) {
  if (!decided_round || request.round != *decided_round || decision_resent[index]) {
    ++report.rejected_messages;
    return {};
  }
  decision_resent[index] = true;
  return tolerate(transport.send(node_id(index), MessageType::kDecision, *decided_round, decided));
}

void ServerSession::apply_decision() { state_->apply_pending(); }

void ServerSession::finish(std::uint64_t rounds) {
  State& s = *state_;
  s.apply_pending();
  // Only after a round this session ran: a server resumed at the run's end sent its state to every
  // node when it began.
  const bool last_round_ran = s.round + 1 == rounds;
  s.round = rounds;  // the state sent below is the run's end
  s.transport.set_round(rounds);
  std::vector<transport::NodeId> behind;
  for (std::size_t i = 0; i < s.n && last_round_ran; ++i) {
    if (!s.votes[i] && !s.quarantined(node_id(i))) behind.push_back(node_id(i));
  }
  // One sealed frame for all of them, queued ahead of their Finish.
  if (!behind.empty())
    (void)s.tolerate(s.transport.broadcast(behind, MessageType::kStateTransfer, rounds, s.state_payload()));
  (void)s.transport.broadcast(s.nodes, MessageType::kControl, rounds, encode(Finish{rounds}));
}

bool ServerSession::State::accept_evidence(const transport::EquivocationProof& proof) const {
  const auto author = proof.first.header.sender;
  if (!options.registry || proof.first.header.job != setup.options.job || author == kServerId || author > n ||
      !transport::check_equivocation_proof(proof, *options.registry).ok()) {
    return false;  // counted against the forwarder, also for an author already quarantined
  }
  if (options.quarantine) options.quarantine->on_equivocation(proof);  // keeps the first proof per author
  return true;
}

// Exchange placement: whether every input envelope of `voter`'s vote is a valid one for this
// round (job, round, author in the voter's row of G, author's signature when the registry is
// known).
bool ServerSession::State::inputs_valid(std::size_t voter, const std::vector<transport::SignedEnvelope>& inputs) const {
  for (const auto& envelope : inputs) {
    const auto& h = envelope.header;
    // decode_audited_vote already checked the type and that authors are strictly ascending.
    if (h.job != setup.options.job || h.round != round || h.role != transport::Role::kNode) return false;
    if (h.sender == kServerId || h.sender > n || !setup.code.get(voter, h.sender - 1)) return false;
    if (options.registry) {
      const auto* entry = options.registry->find(h.sender);
      if (entry == nullptr || entry->role != transport::Role::kNode ||
          !transport::verify_envelope_signature(envelope, entry->key)) {
        return false;
      }
    }
  }
  return true;
}

// Compares each author's counted digest with the other votes' of this round.
void ServerSession::State::audit_inputs(const std::vector<transport::SignedEnvelope>& inputs) {
  for (const auto& envelope : inputs) {
    const auto author = envelope.header.sender;
    const auto [it, first] = counted_inputs.emplace(author, envelope);
    if (first || it->second.header.payload_digest == envelope.header.payload_digest) continue;
    // Two voters counted different signed inputs of one author in this round: the author sent
    // different signs to different receivers. Once per author and round.
    if (!equivocators.insert(author).second || !options.quarantine) continue;
    if (options.quarantine->is_quarantined(author)) continue;  // proven (or excluded) already
    transport::EquivocationProof proof{it->second, envelope};
    if (options.registry && transport::check_equivocation_proof(proof, *options.registry).ok()) {
      options.quarantine->on_equivocation(proof);
    } else {
      options.quarantine->report(author);
    }
  }
}

}  // namespace ballot::runtime

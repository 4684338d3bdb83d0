#include "runtime/node_session.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "coding/codec_registry.h"
#include "coding/election_encoder.h"
#include "coding/global_topk.h"
#include "core/enforce.h"
#include "runtime/checkpoint.h"
#include "runtime/detail/peer_failure.h"
#include "runtime/messages.h"
#include "runtime/replica.h"
#include "runtime/signed_record.h"

namespace ballot::runtime {
namespace {

using Clock = SessionClock;
using transport::MessageType;

using detail::tolerate_peer_failure;

}  // namespace

Result<bool> NodeAdversary::deliver(MessageType, std::uint64_t, std::uint32_t, const std::vector<std::uint8_t>&,
                                    transport::OutboundFrame honest, const std::vector<transport::NodeId>& receivers,
                                    Link& link) {
  for (auto to : receivers) BALLOT_TRY(link.send(to, honest));
  return true;
}

struct NodeSession::State final : NodeAdversary::Link {
  struct Input {  // exchange: one partition's signs from the node's row
    std::uint32_t source = 0;
    PartitionSigns signs;
    transport::SignedEnvelope envelope;
  };
  struct PendingVote {  // exchange: the vote waiting for its inputs
    bool active = false;
    std::uint64_t round = 0;
    RoundStart start;
    Clock::time_point deadline;
    std::vector<Input> inputs;  // at most two per source: a second different one is equivocation
  };

  State(const TrainingSetup& s, std::size_t i, transport::Transport& t, Replica& r, NodeSessionOptions o)
      : setup(s),
        index(i),
        transport(t),
        replica(r),
        options(std::move(o)),
        exchange(s.options.placement == Placement::kExchange && s.sign_vote()),
        row(s.code.row(i)),
        column(s.code.column(i)),
        adversary(options.adversary),
        clock(options.clock ? options.clock : steady_session_clock()) {
    if (!adversary) adversary = std::make_shared<NodeAdversary>();
  }

  // ---- Link: what the adversary may do with the network.
  transport::OutboundFrame seal(MessageType type, std::uint64_t r, std::vector<std::uint8_t> payload) override {
    return transport.seal(type, r, std::make_shared<const std::vector<std::uint8_t>>(std::move(payload)));
  }
  Status send(transport::NodeId to, transport::OutboundFrame frame) override {
    return tolerate_peer_failure(transport.send_frame(to, std::move(frame)), stats.send_failures);
  }
  void sleep_for(std::chrono::milliseconds duration) override { clock->sleep_for(duration); }
  Clock::time_point now() const { return clock->now(); }
  Status send_control(std::vector<std::uint8_t> payload) {
    return tolerate_peer_failure(transport.send(kServerId, MessageType::kControl, round, std::move(payload)),
                                 stats.send_failures);
  }

  bool in_row(std::size_t source) const { return source < setup.options.nodes && setup.code.get(index, source); }
  bool silent(std::uint64_t r) const { return adversary->silence(r) != NodeAdversary::Silence::kNone; }
  bool voted(std::uint64_t r) const { return last_vote && last_vote_round == r; }

  // Handles messages until the next event, or until `until` passed without one (nullopt).
  Result<std::optional<NodeEvent>> run_until(std::optional<Clock::time_point> until);
  Result<std::optional<NodeEvent>> handle(transport::Message& message);
  Result<std::optional<NodeEvent>> on_state_transfer(const transport::Message& message);
  Result<std::optional<NodeEvent>> on_round_start(const transport::Message& message);
  Result<std::optional<NodeEvent>> on_decision(const transport::Message& message);
  // Relayed decisions: a piece from the server (handed on to every other node) or from a node.
  Result<std::optional<NodeEvent>> on_decision_piece(const transport::Message& message);
  std::optional<DecisionPiece> check_relayed_piece(const transport::Message& message);
  Result<std::optional<NodeEvent>> take_piece(DecisionPiece piece);
  // Applies the decision of the node's round (whole, or put together from its pieces).
  std::optional<NodeEvent> apply_decided(std::span<const std::uint8_t> payload);
  void take_global_set(const Replica::AppliedDirection& applied);
  // The decision of the node's round is due (a piece or the next round's start arrived): ask the
  // server for it whole when it is late, and give up on it (rejoin) when that did not help.
  Result<std::optional<NodeEvent>> check_decision_due();
  // A new round (decided, or installed by a state transfer): no pieces, nothing due or asked.
  void forget_decision_wait() {
    pieces.clear();
    decision_due.reset();
    decision_asked = decision_given_up = false;
  }
  std::chrono::milliseconds decision_wait() const {
    return std::max(std::chrono::milliseconds(50), std::chrono::milliseconds(last_deadline_ms / 4));
  }
  Status on_partition_signs(transport::Message& message);
  void take_input(transport::Message& input);
  bool inputs_complete() const;
  Status finish_exchange_vote();
  // Seals `payload` through the signed record and hands it to the adversary seam.
  Result<bool> seal_and_deliver(MessageType type, const RoundStart& start, std::vector<std::uint8_t> payload,
                                const std::vector<transport::NodeId>& receivers);
  Status send_vote(const RoundStart& start, std::vector<std::uint8_t> payload);

  const TrainingSetup& setup;
  std::size_t index;
  transport::Transport& transport;
  Replica& replica;
  NodeSessionOptions options;
  const bool exchange;
  const std::vector<std::uint32_t> row;
  const std::vector<std::uint32_t> column;
  std::shared_ptr<NodeAdversary> adversary;
  std::shared_ptr<SessionClock> clock;
  std::optional<SignedRecord> record;
  std::unique_ptr<coding::Codec> codec;            // gradient path
  coding::GlobalTopKCodec* global_topk = nullptr;  // codec, when it is gtopk
  std::vector<std::uint8_t> global_set;            // its last decision's global set (global_set())
  Replica::AppliedDirection applied;               // the last FloatDecision (global top-k), its memory reused
  NodeSessionStats stats;

  std::uint64_t round = 0;              // the next round the replica will apply
  bool started = false;                 // a round start was seen
  std::optional<RoundStart> computing;  // the round handed out by kCompute, not yet submitted
  std::optional<std::vector<std::uint8_t>> last_vote;
  std::uint64_t last_vote_round = 0;
  // The server restarted from a checkpoint of the round this node already voted in: the vote it
  // held is gone, so the recorded vote goes out again with the round's next start.
  bool vote_lost = false;
  PendingVote pending;
  // The vote of the computing round while it goes out in pieces (submit_vote_piece): its head,
  // which pieces went out, and the words so far (the whole vote once all are out: last_vote).
  struct PieceVote {
    double loss = 0.0;
    std::uint32_t count = 0;
    std::uint32_t sent = 0;
    std::vector<bool> out;
    std::vector<std::uint64_t> words;
  };
  std::optional<PieceVote> piece_vote;
  std::uint64_t pieces_abstained = 0;  // rounds whose pieces an earlier process had begun
  DecisionAssembly pieces;             // of the decision of the node's round, while they arrive
  std::uint32_t last_deadline_ms = 3000;
  // The next round's start, held while the decision of this round is on its way (relayed pieces
  // arrive after the start the server sent right after them): handled once the decision is in.
  std::optional<transport::Message> deferred_start;
  std::optional<Clock::time_point> decision_due;
  bool decision_asked = false;
  bool decision_given_up = false;  // for this round: the next start goes the rejoin way
  bool deferred_finish = false;    // the server finished; the run ends with its last decision
  // Inputs that arrived before their round started here: at most two per source of the row and
  // round, for this round and the next only.
  std::map<std::uint64_t, std::vector<transport::Message>> early;
  std::size_t forwarded = 0;  // evidence proofs already sent
  Clock::time_point last_heard;
  Clock::time_point last_rejoin;
  // Nothing usable from the server for two round deadlines: ask to rejoin (the server answers a
  // Join with the state and the current round's start).
  std::chrono::milliseconds rejoin_after{0};
  // The node's round when a round start last made it ask for the state, and when: round starts
  // queued while its link was down arrive in a burst, and each Join would cost the server a copy
  // of the whole model. One request per round of the node per join_retry.
  std::optional<std::uint64_t> state_asked_round;
  Clock::time_point state_asked_at;
};

NodeSession::NodeSession(const TrainingSetup& setup, std::size_t node_index, transport::Transport& transport,
                         Replica& replica, NodeSessionOptions options)
    : state_(std::make_unique<State>(setup, node_index, transport, replica, std::move(options))) {}

NodeSession::~NodeSession() = default;

std::uint64_t NodeSession::round() const noexcept { return state_->round; }
coding::Codec* NodeSession::codec() noexcept { return state_->codec.get(); }
std::span<const std::uint8_t> NodeSession::global_set() const noexcept { return state_->global_set; }

bool NodeSession::round_open() const noexcept {
  const State& s = *state_;
  return s.computing && s.computing->round == s.round;
}
const NodeSessionStats& NodeSession::stats() const noexcept {
  if (state_->record) state_->stats.abstained = state_->record->abstained() + state_->pieces_abstained;
  return state_->stats;
}

Status NodeSession::start() {
  State& s = *state_;
  const transport::RegistryEntry* self = s.options.registry ? s.options.registry->find(node_id(s.index)) : nullptr;
  BALLOT_ASSIGN_OR_RETURN(auto record, SignedRecord::open(s.options.record_path, node_id(s.index), s.setup.options.job,
                                                          self ? &self->key : nullptr, s.options.record_rounds));
  s.record.emplace(std::move(record));
  if (!s.setup.sign_vote()) {
    BALLOT_ASSIGN_OR_RETURN(s.codec, coding::make_codec(s.setup.options.codec));
    s.global_topk = dynamic_cast<coding::GlobalTopKCodec*>(s.codec.get());
  }
  s.rejoin_after = std::max(s.options.join_retry, std::chrono::milliseconds(2 * 3000));
  BALLOT_TRY(s.send_control(encode(Join{s.round, s.replica.state_digest()})));
  s.last_heard = s.last_rejoin = s.now();
  return {};
}

Result<NodeEvent> NodeSession::poll() {
  auto event = state_->run_until(std::nullopt);  // without an end: an event or an error
  if (!event.ok()) return std::move(event).error();
  NodeEvent next;
  if (event->has_value()) next = std::move(**event);
  return next;
}

Result<std::optional<NodeEvent>> NodeSession::poll_for(std::chrono::milliseconds max_wait) {
  State& s = *state_;
  return s.run_until(s.now() + std::max(max_wait, std::chrono::milliseconds(0)));
}

Result<std::optional<NodeEvent>> NodeSession::State::run_until(std::optional<Clock::time_point> until) {
  using std::chrono::milliseconds;
  // On real time, a wait ends when its time is spent, even while messages keep arriving (a
  // flooding peer must not keep a caller from its own checks, Ctrl-C in Python among them); a
  // poll_for(0) handles what is there when it starts and what keeps coming for at most 1 ms. The
  // lockstep engine's virtual time moves only when a session waits: its polls drain as before.
  const bool real_time = clock == steady_session_clock();
  const auto spent_at = until ? std::max(*until, now() + std::chrono::milliseconds(1)) : Clock::time_point{};
  while (true) {
    if (options.evidence && options.evidence->proof_count() > forwarded) {  // new proofs only: no copy per message
      const auto proofs = options.evidence->proofs();
      for (; forwarded < proofs.size(); ++forwarded) BALLOT_TRY(send_control(encode(Evidence{proofs[forwarded]})));
    }
    // The decision of the last round is applied: the run is over, whether or not the server's
    // Finish arrives (the server saved its final checkpoint before it sent that decision).
    if (started && round >= setup.options.rounds)
      return std::optional<NodeEvent>(NodeEvent{.kind = NodeEvent::Kind::kFinished, .round = round});
    if (deferred_start && !decision_due) {
      // The decision arrived: the held start is handled now (or dropped when it is stale).
      auto start = std::move(*deferred_start);
      deferred_start.reset();
      if (start.round == round) {
        BALLOT_ASSIGN_OR_RETURN(auto event, handle(start));
        if (event) return event;
      }
    }
    BALLOT_ASSIGN_OR_RETURN(auto due, check_decision_due());
    if (due) return due;
    auto timeout = started ? std::min(options.idle_timeout, rejoin_after) : options.join_retry;
    if (decision_due) {
      const auto left = std::chrono::duration_cast<milliseconds>(*decision_due - now());
      timeout = std::min(timeout, std::max(left + milliseconds(1), milliseconds(1)));
    }
    if (pending.active) {
      const auto left = std::chrono::duration_cast<milliseconds>(pending.deadline - now());
      timeout = std::min(timeout, std::max(left + milliseconds(1), milliseconds(1)));
    }
    if (until)
      timeout = std::min(timeout, std::max(std::chrono::duration_cast<milliseconds>(*until - now()), milliseconds(0)));
    auto message = transport.receive(timeout);
    if (!message.ok()) {
      if (message.error().code != ErrorCode::kTimeout) return std::move(message).error();
      BALLOT_TRY(finish_exchange_vote());
      const auto at = now();
      if (at - last_heard >= options.idle_timeout) {
        return make_error(ErrorCode::kTimeout, "node " + std::to_string(index) + ": no message from the server");
      }
      // Before the first round start: a Join every join_retry; after it: when the server has been
      // silent for rejoin_after.
      const auto since_join = at - last_rejoin;
      if ((!started && since_join >= options.join_retry) ||
          (started && at - last_heard >= rejoin_after && since_join >= rejoin_after)) {
        last_rejoin = at;
        BALLOT_TRY(send_control(encode(Join{round, replica.state_digest()})));
      }
      if (until && at >= *until) return std::optional<NodeEvent>();
      continue;
    }
    BALLOT_ASSIGN_OR_RETURN(auto event, handle(*message));
    if (event) return event;
    if (real_time && until && now() >= spent_at) return std::optional<NodeEvent>();
  }
}

Result<NodeEvent> NodeSession::next_round() {
  while (true) {
    BALLOT_ASSIGN_OR_RETURN(auto event, poll());
    if (event.kind == NodeEvent::Kind::kCompute || event.kind == NodeEvent::Kind::kFinished ||
        event.kind == NodeEvent::Kind::kCrashed) {
      return event;
    }
  }
}

Result<NodeEvent> NodeSession::await_decision() {
  const std::uint64_t waiting_for = state_->round;
  while (true) {
    BALLOT_ASSIGN_OR_RETURN(auto event, poll());
    if (event.kind != NodeEvent::Kind::kDecided || event.round > waiting_for) return event;
  }
}

Result<std::optional<NodeEvent>> NodeSession::State::handle(transport::Message& message) {
  if (message.from != kServerId) {
    if (message.type == MessageType::kDecisionPiece) {
      if (silent(message.round)) return std::optional<NodeEvent>();
      return on_decision_piece(message);
    }
    BALLOT_TRY(on_partition_signs(message));
    return std::optional<NodeEvent>();
  }
  last_heard = now();
  // Crash: silent while active. Without an end the node is gone for good; with one it comes back
  // behind and rejoins through the state transfer.
  if (message.type != MessageType::kControl && silent(message.round)) {
    if (adversary->silence(message.round) == NodeAdversary::Silence::kForever) {
      return std::optional<NodeEvent>(NodeEvent{.kind = NodeEvent::Kind::kCrashed, .round = round});
    }
    // Follow the round window, so that the first round start after the crash is accepted.
    if (message.type == MessageType::kRoundStart) transport.set_round(message.round);
    return std::optional<NodeEvent>();
  }
  switch (message.type) {
    case MessageType::kStateTransfer:
      return on_state_transfer(message);
    case MessageType::kRoundStart:
      return on_round_start(message);
    case MessageType::kDecision:
      return on_decision(message);
    case MessageType::kDecisionPiece:
      return on_decision_piece(message);
    case MessageType::kControl:
      if (auto control = decode_control(message.payload); control.ok() && std::holds_alternative<Finish>(*control)) {
        if (options.relayed_decisions && std::get<Finish>(*control).rounds == round + 1 && !decision_given_up) {
          // The last decision is on its way in relayed pieces: the run ends once it is applied.
          deferred_finish = true;
          if (!decision_due) decision_due = now() + decision_wait();
          return std::optional<NodeEvent>();
        }
        return std::optional<NodeEvent>(NodeEvent{.kind = NodeEvent::Kind::kFinished, .round = round});
      }
      return std::optional<NodeEvent>();
    default:
      return std::optional<NodeEvent>();
  }
}

Result<std::optional<NodeEvent>> NodeSession::State::on_state_transfer(const transport::Message& message) {
  auto checkpoint = decode_checkpoint(message.payload);
  const auto state_before = replica.state_digest();
  if (!checkpoint.ok() || !replica.restore_from(*checkpoint).ok()) return std::optional<NodeEvent>();
  const bool moved = checkpoint->round != round;
  const bool rewound = checkpoint->round < round;
  const bool resumed = checkpoint->sections.count(std::string(kResumedSection)) != 0;
  round = checkpoint->round;
  transport.reset_round(round);  // the server may have resumed from an older round
  // A restarted server has lost the proofs it had: send them again (one per author).
  if (resumed || rewound) forwarded = 0;
  forget_decision_wait();
  deferred_start.reset();
  // The state of a round this node already voted in (the server found its vote on another model):
  // that vote stands. Voting again would advance the worker momentum twice and send a second,
  // different vote for the round — equivocation.
  if (!voted(round)) last_vote.reset();
  // A state that takes the node back to an earlier round comes only from a server that restarted
  // from an older checkpoint (a live server never rewinds a node), and so does a state marked
  // resumed (the restarted server's first broadcast, also when it resumed at the node's own
  // round): when the node had voted in that round, the vote went down with the old process and is
  // sent again. An unmarked state of the node's own round is no such sign: a live server also
  // sends one in answer to a stale Join, or to a vote on another model, and a second copy of a
  // vote it holds would count as a replay.
  vote_lost = voted(round) && (rewound || resumed);
  // Global top-k: the round of the codec's last selection is passed; its global set never comes.
  if (moved && global_topk != nullptr) global_topk->drop_selection();
  state_asked_round.reset();
  pending.active = false;
  computing.reset();
  piece_vote.reset();
  early.clear();
  ++stats.rejoins;
  if (!moved && !resumed && state_before != replica.state_digest()) ++stats.resynchronised;
  BALLOT_TRY(send_control(encode(Join{round, replica.state_digest()})));
  return std::optional<NodeEvent>(NodeEvent{.kind = NodeEvent::Kind::kStateInstalled, .round = round, .moved = moved});
}

Result<std::optional<NodeEvent>> NodeSession::State::on_round_start(const transport::Message& message) {
  auto start = decode_round_start(message.payload);
  if (!start.ok() || start->round != message.round || start->round < round) return std::optional<NodeEvent>();
  if (options.relayed_decisions && started && start->round == round + 1 && !decision_given_up) {
    // The decision of this round is on its way (relayed pieces come after the start the server
    // sent right after them) or was missed: wait for it a moment before asking for the state.
    deferred_start = message;
    if (!decision_due) decision_due = now() + decision_wait();
    return std::optional<NodeEvent>();
  }
  started = true;
  last_deadline_ms = start->deadline_ms;
  rejoin_after = std::max(options.join_retry, std::chrono::milliseconds(2 * std::uint64_t{start->deadline_ms}));
  if (start->round > round || start->model_digest != replica.state_digest()) {
    // Behind (restarted, or missed a decision) or diverged: ask for the current state, once until
    // it arrives (or join_retry passed: the Join or the state may have been lost).
    const auto at = now();
    if (state_asked_round != round || at - state_asked_at >= options.join_retry) {
      state_asked_round = round;
      state_asked_at = at;
      BALLOT_TRY(send_control(encode(Join{round, replica.state_digest()})));
    }
    return std::optional<NodeEvent>();
  }
  // A repeated start (the server answers every Join with the round's start) of a round in
  // progress or already voted changes nothing: the vote goes out once. Computing it again would
  // advance the worker momentum twice and make the node equivocate; re-sending it would reach the
  // server after it decided, as a stale frame counted against this node.
  if (voted(round) && std::exchange(vote_lost, false)) {
    // To a restarted server: the same signed frame again (the signed record returns it), never a
    // vote computed anew.
    BALLOT_TRY(send_vote(*start, *last_vote));
    return std::optional<NodeEvent>();
  }
  if ((pending.active && pending.round == round) || voted(round) || computing) return std::optional<NodeEvent>();
  computing = *start;
  NodeEvent event{.kind = NodeEvent::Kind::kCompute, .round = round};
  event.work.round = round;
  event.work.deadline_ms = start->deadline_ms;
  event.work.model_digest = start->model_digest;
  if (exchange) {
    event.work.kind = RoundWork::Kind::kPartitionSigns;
    event.work.partitions = {static_cast<std::uint32_t>(index)};
  } else {
    event.work.kind = setup.sign_vote() ? RoundWork::Kind::kVote : RoundWork::Kind::kGradient;
    event.work.partitions = row;
  }
  return std::optional<NodeEvent>(std::move(event));
}

Result<std::optional<NodeEvent>> NodeSession::State::on_decision(const transport::Message& message) {
  if (message.round != round) return std::optional<NodeEvent>();
  return apply_decided(message.payload);
}

std::optional<NodeEvent> NodeSession::State::apply_decided(std::span<const std::uint8_t> payload) {
  pending.active = false;  // decided without this node's vote: it would come too late
  if (!replica.apply_decision(round, payload, setup.sign_vote(), global_topk != nullptr ? &applied : nullptr).ok()) {
    return std::nullopt;
  }
  if (global_topk != nullptr) take_global_set(applied);
  computing.reset();
  piece_vote.reset();
  ++round;
  ++stats.rounds;
  transport.set_round(round);
  forget_decision_wait();
  return NodeEvent{.kind = NodeEvent::Kind::kDecided, .round = round};
}

// Global top-k: the coordinates the decision changed are the round's global set. The codec's last
// selection (when the session encoded it) takes it now: what it sent elsewhere goes back into its
// residual. `applied` is the decision the replica applied; a sparse one is read at its entries only.
void NodeSession::State::take_global_set(const Replica::AppliedDirection& applied) {
  const auto& layout = replica.model().layout();
  const auto granularity = global_topk->granularity();
  global_set = (applied.listed ? coding::global_set_of(*applied.listed, layout, granularity)
                               : coding::global_set_of(applied.direction, layout, granularity))
                   .bytes;
  // A message of this session's own making, for this layout: it cannot be refused.
  BALLOT_ENFORCE(global_topk->accept_global(global_set, replica.model().layout()).ok());
}

// ---- relayed decisions

Result<std::optional<NodeEvent>> NodeSession::State::on_decision_piece(const transport::Message& message) {
  if (message.round != round) return std::optional<NodeEvent>();  // of a round this node is not in
  if (message.from != kServerId) {
    auto piece = check_relayed_piece(message);
    if (!piece) return std::optional<NodeEvent>();
    return take_piece(std::move(*piece));
  }
  auto piece = decode_decision_piece(message.payload, decision_bytes(replica.dimension(), setup.sign_vote()),
                                     setup.options.nodes);
  if (!piece.ok() || piece->round != round || !message.envelope) return std::optional<NodeEvent>();
  // Hand it on to every other node, under the server's signature.
  auto payload = encode(
      RelayedPiece{*message.envelope, std::vector<std::uint8_t>(message.payload.begin(), message.payload.end())});
  std::vector<transport::NodeId> receivers;
  for (std::size_t i = 0; i < setup.options.nodes; ++i) {
    if (i != index) receivers.push_back(node_id(i));
  }
  auto frame =
      transport.seal(MessageType::kDecisionPiece, round, std::make_shared<const std::vector<std::uint8_t>>(payload));
  BALLOT_ASSIGN_OR_RETURN(const bool relayed, adversary->deliver(MessageType::kDecisionPiece, round, last_deadline_ms,
                                                                 payload, std::move(frame), receivers, *this));
  if (relayed) ++stats.pieces_relayed;
  return take_piece(std::move(*piece));
}

// A piece another node relayed counts only with the server's valid signature over it, for this
// job and round.
std::optional<DecisionPiece> NodeSession::State::check_relayed_piece(const transport::Message& message) {
  const auto reject = [&]() -> std::optional<DecisionPiece> {
    ++stats.pieces_rejected;
    return std::nullopt;
  };
  auto relayed = decode_relayed_piece(message.payload);
  if (!relayed.ok()) return reject();
  const auto& h = relayed->envelope.header;
  if (h.sender != kServerId || h.type != MessageType::kDecisionPiece || h.round != round ||
      !transport.check_relayed(relayed->envelope, relayed->piece).ok()) {
    return reject();
  }
  auto piece = decode_decision_piece(relayed->piece, decision_bytes(replica.dimension(), setup.sign_vote()),
                                     setup.options.nodes);
  if (!piece.ok() || piece->round != round) return reject();
  return std::move(*piece);
}

Result<std::optional<NodeEvent>> NodeSession::State::take_piece(DecisionPiece piece) {
  auto whole = pieces.add(piece);
  if (!decision_due) decision_due = now() + decision_wait();
  if (!whole) return std::optional<NodeEvent>();
  return std::optional<NodeEvent>(apply_decided(*whole));
}

Result<std::optional<NodeEvent>> NodeSession::State::check_decision_due() {
  if (!decision_due || now() < *decision_due) return std::optional<NodeEvent>();
  if (!decision_asked) {
    decision_asked = true;
    decision_due = now() + decision_wait();
    ++stats.decisions_requested;
    BALLOT_TRY(send_control(encode(DecisionRequest{round})));
    return std::optional<NodeEvent>();
  }
  // Asked, and still nothing: the server has moved on (or restarted); the start goes the way of
  // a node that is behind (Join, the state).
  decision_due.reset();
  decision_given_up = true;
  pieces.clear();
  if (deferred_finish) return std::optional<NodeEvent>(NodeEvent{.kind = NodeEvent::Kind::kFinished, .round = round});
  if (!deferred_start) return std::optional<NodeEvent>();
  auto start = std::move(*deferred_start);
  deferred_start.reset();
  return handle(start);
}

// ---- submitting the computed message of a round

Status NodeSession::submit_vote(double loss, BitVector signs) {
  State& s = *state_;
  if (!round_open()) return {};  // overtaken: nothing to send
  const RoundStart start = *std::exchange(s.computing, std::nullopt);
  if (s.exchange || !s.setup.sign_vote()) return make_error(ErrorCode::kInvalidArgument, "this round takes no vote");
  Vote vote{.round = start.round, .loss = loss, .model_digest = start.model_digest, .signs = std::move(signs)};
  s.adversary->replace(MessageType::kVote, {start.round, &vote.model_digest, &vote.signs, nullptr});
  return s.send_vote(start, encode(vote));
}

Status NodeSession::submit_vote_piece(double loss, std::uint32_t index, std::uint32_t count,
                                      std::span<const std::uint64_t> words) {
  State& s = *state_;
  if (!round_open()) return {};  // overtaken: nothing to send
  if (s.exchange || !s.setup.sign_vote()) return make_error(ErrorCode::kInvalidArgument, "this round takes no vote");
  if (s.options.adversary) {
    return make_error(ErrorCode::kInvalidArgument,
                      "vote pieces are an honest node's: a node with an adversary sends its vote whole");
  }
  const RoundStart& start = *s.computing;
  const std::size_t dimension = s.replica.dimension();
  const std::size_t total = BitVector::words_for(dimension);
  BALLOT_TRY(check_vote_piece(total, index, count));
  const std::size_t begin = vote_piece_word(total, index, count), end = vote_piece_word(total, index + 1, count);
  if (words.size() != end - begin) {
    return make_error(ErrorCode::kInvalidArgument, "vote piece " + std::to_string(index) + " of " +
                                                       std::to_string(count) + " holds words [" +
                                                       std::to_string(begin) + ", " + std::to_string(end) + "), got " +
                                                       std::to_string(words.size()) + " words");
  }
  if (s.piece_vote && (s.piece_vote->count != count || std::memcmp(&s.piece_vote->loss, &loss, sizeof loss) != 0 ||
                       s.piece_vote->out[index])) {
    return make_error(ErrorCode::kInvalidArgument, "vote piece " + std::to_string(index) +
                                                       ": every piece of a vote goes out once, with the "
                                                       "loss and count of the first");
  }
  if (!s.piece_vote) {
    // The first piece of the round: one entry in the signed record for the whole vote, so that a
    // restarted node never sends other pieces for a round it sent pieces in (it abstains there).
    VotePiece head{start.round, loss, start.model_digest, dimension, 0, count, {}};
    const bool before = s.record->find(MessageType::kVotePiece, start.round) != nullptr;
    BALLOT_ASSIGN_OR_RETURN(
        auto sealed,
        s.record->seal_once(
            MessageType::kVotePiece, start.round, std::make_shared<const std::vector<std::uint8_t>>(encode(head)),
            [&](MessageType t, std::uint64_t r, auto p) { return s.transport.seal(t, r, std::move(p)); }));
    if (before || !sealed) {
      if (sealed) ++s.pieces_abstained;  // else the record counted it
      s.computing.reset();
      return {};
    }
    s.piece_vote =
        State::PieceVote{loss, count, 0, std::vector<bool>(count, false), std::vector<std::uint64_t>(total, 0)};
  }
  State::PieceVote& vote = *s.piece_vote;
  std::copy(words.begin(), words.end(), vote.words.begin() + static_cast<std::ptrdiff_t>(begin));
  vote.out[index] = true;
  VotePiece piece{start.round,
                  loss,
                  start.model_digest,
                  dimension,
                  index,
                  count,
                  std::vector<std::uint64_t>(words.begin(), words.end())};
  BALLOT_TRY(s.send(kServerId, s.seal(MessageType::kVotePiece, start.round, encode(piece))));
  if (++vote.sent < count) return {};
  // All out: the vote is sent, and kept whole for a server that restarts in this round.
  auto signs = BitVector::from_words(dimension, vote.words);
  if (!signs.ok()) return make_error(ErrorCode::kInvalidArgument, "vote pieces: " + signs.error().message);
  s.last_vote = encode(Vote{start.round, loss, start.model_digest, std::move(*signs)});
  s.last_vote_round = start.round;
  s.computing.reset();
  s.piece_vote.reset();
  ++s.stats.votes_sent;
  return {};
}

Status NodeSession::submit_gradient(double loss, std::span<const float> gradient) {
  State& s = *state_;
  if (!round_open()) return {};
  const RoundStart start = *std::exchange(s.computing, std::nullopt);
  if (!s.codec) return make_error(ErrorCode::kInvalidArgument, "this round takes no gradient");
  EncodedVote vote{.round = start.round, .loss = loss, .model_digest = start.model_digest};
  std::vector<float> replaced;  // what an adversary sends instead
  if (s.options.adversary) {
    replaced.assign(gradient.begin(), gradient.end());
    s.adversary->replace(MessageType::kVote, {start.round, nullptr, nullptr, &replaced});
    gradient = replaced;
  }
  Rng rng = codec_rng(s.setup, start.round, s.index);
  vote.bytes = s.codec->encode(gradient, s.replica.model().layout(), rng).bytes;
  // The digest it claims is the last thing the adversary may change (after the codec's draw).
  s.adversary->replace(MessageType::kVote, {start.round, &vote.model_digest, nullptr, nullptr});
  return s.send_vote(start, encode(vote));
}

Status NodeSession::submit_encoded(double loss, std::vector<std::uint8_t> bytes) {
  State& s = *state_;
  if (!round_open()) return {};
  if (!s.codec) return make_error(ErrorCode::kInvalidArgument, "this round takes no gradient");
  if (s.options.adversary) {
    return make_error(ErrorCode::kInvalidArgument,
                      "an encoded gradient is an honest node's: a node with an adversary submits its gradient");
  }
  const std::size_t size = s.codec->wire_size(s.replica.model().layout());
  if (s.codec->exact_wire_size() ? bytes.size() != size : bytes.size() > size) {
    return make_error(ErrorCode::kInvalidArgument, "the encoded gradient has " + std::to_string(bytes.size()) +
                                                       " bytes; codec " + s.codec->spec() +
                                                       (s.codec->exact_wire_size() ? " writes " : " writes at most ") +
                                                       std::to_string(size) + " for this model");
  }
  const RoundStart start = *std::exchange(s.computing, std::nullopt);
  EncodedVote vote{.round = start.round, .loss = loss, .model_digest = start.model_digest, .bytes = std::move(bytes)};
  return s.send_vote(start, encode(vote));
}

Status NodeSession::submit_partition_signs(double loss, BitVector signs) {
  State& s = *state_;
  if (!round_open()) return {};
  const RoundStart start = *std::exchange(s.computing, std::nullopt);
  if (!s.exchange) return make_error(ErrorCode::kInvalidArgument, "this round takes no partition signs");
  PartitionSigns own{.round = start.round, .loss = loss, .model_digest = start.model_digest, .signs = std::move(signs)};
  auto payload = encode(own);
  std::vector<transport::NodeId> receivers;
  for (auto receiver : s.column) {
    if (receiver != s.index) receivers.push_back(node_id(receiver));
  }
  // The envelope of its own input, as every receiver of the column will hold it.
  BALLOT_ASSIGN_OR_RETURN(auto sealed, s.record->seal_once(MessageType::kPartitionSigns, start.round,
                                                           std::make_shared<const std::vector<std::uint8_t>>(payload),
                                                           [&](MessageType t, std::uint64_t r, auto p) {
                                                             return s.transport.seal(t, r, std::move(p));
                                                           }));
  // It signed other signs for this round before (a restart or rewind lost the state it had):
  // its input abstains rather than contradict what its column may already hold.
  std::optional<transport::SignedEnvelope> envelope;
  if (sealed) {
    const auto& head = sealed->head;
    if (head.size() == transport::kFrameHeaderSize + transport::kEnvelopeMetaSize) {
      auto decoded =
          transport::decode_envelope(std::span<const std::uint8_t>(head).subspan(transport::kFrameHeaderSize));
      if (decoded.ok()) envelope = *decoded;
    }
    if (!envelope) envelope.emplace();
    BALLOT_ASSIGN_OR_RETURN(const bool sent,
                            s.adversary->deliver(MessageType::kPartitionSigns, start.round, start.deadline_ms, payload,
                                                 std::move(*sealed), receivers, s));
    if (!sent) envelope.reset();  // nothing sent, nothing held
  }
  // Wait for the inputs of its row, within the round deadline so that the vote still counts.
  const double fraction = std::clamp(s.options.exchange_input_fraction, 0.0, 1.0);
  const auto wait = std::chrono::duration<double, std::milli>(fraction * static_cast<double>(start.deadline_ms));
  s.pending = State::PendingVote{
      true, start.round, start, s.now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(wait), {}};
  if (s.in_row(s.index) && envelope) {  // its own input is handled here, without the network
    s.pending.inputs.push_back(State::Input{static_cast<std::uint32_t>(s.index), std::move(own), *envelope});
  }
  if (auto it = s.early.find(s.round); it != s.early.end()) {
    for (auto& input : it->second) s.take_input(input);
  }
  s.early.erase(s.early.begin(), s.early.upper_bound(s.round));
  return s.finish_exchange_vote();
}

Status NodeSession::State::send_vote(const RoundStart& start, std::vector<std::uint8_t> payload) {
  last_vote = payload;
  last_vote_round = start.round;
  BALLOT_ASSIGN_OR_RETURN(
      auto sealed,
      record->seal_once(MessageType::kVote, start.round, std::make_shared<const std::vector<std::uint8_t>>(payload),
                        [&](MessageType t, std::uint64_t r, auto p) { return transport.seal(t, r, std::move(p)); }));
  // It signed another vote for this round before: abstain.
  if (sealed) {
    auto delivered = adversary->deliver(MessageType::kVote, start.round, start.deadline_ms, *last_vote,
                                        std::move(*sealed), {kServerId}, *this);
    if (!delivered.ok()) return std::move(delivered).error();
  }
  ++stats.votes_sent;
  return {};
}

// ---- exchange placement: the inputs of the node's row

Status NodeSession::State::on_partition_signs(transport::Message& message) {
  // Nodes talk to nodes only in exchange placement, and only to send partition signs.
  if (!exchange || message.type != MessageType::kPartitionSigns || message.from > setup.options.nodes ||
      !in_row(message.from - 1) || silent(message.round)) {
    return {};
  }
  if (pending.active && message.round == pending.round) {
    take_input(message);
    return finish_exchange_vote();
  }
  if ((message.round == round || message.round == round + 1) && !voted(message.round)) {
    // At most two per source and round (a second, different one is equivocation), so that a
    // source repeating itself cannot crowd out the others' inputs.
    auto& held = early[message.round];
    const auto from_source = std::count_if(held.begin(), held.end(),
                                           [&](const transport::Message& other) { return other.from == message.from; });
    if (from_source < 2) held.push_back(std::move(message));
  }
  return {};
}

void NodeSession::State::take_input(transport::Message& input) {
  const std::size_t source = input.from - 1;
  auto signs = decode_vote(input.payload, replica.dimension());
  if (!signs.ok() || signs->round != input.round || signs->model_digest != pending.start.model_digest ||
      !input.envelope) {
    ++stats.inputs_rejected;
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
}

bool NodeSession::State::inputs_complete() const {
  return std::all_of(row.begin(), row.end(), [&](std::uint32_t source) {
    return std::any_of(pending.inputs.begin(), pending.inputs.end(),
                       [&](const Input& held) { return held.source == source; });
  });
}

// Votes over the inputs held once all of the row arrived or the input deadline passed.
Status NodeSession::State::finish_exchange_vote() {
  if (!pending.active || (!inputs_complete() && now() < pending.deadline)) return {};
  pending.active = false;
  std::vector<coding::ExchangeInput> inputs;
  for (const auto& input : pending.inputs) inputs.push_back({input.source, &input.signs.signs});
  auto elected = coding::encode_exchange(setup.code, index, replica.dimension(), inputs);
  stats.inputs_missing += elected.missing.size();
  stats.inputs_rejected += elected.rejected.size();
  AuditedVote vote{
      .vote =
          Vote{.round = pending.round, .model_digest = pending.start.model_digest, .signs = std::move(elected.vote)}};
  // The mean of its inputs' losses: a Byzantine source's NaN is left out.
  FiniteLossMean loss;
  for (auto source : elected.counted) {
    // The counted input of each source is its only one (equivocating sources are not counted).
    const auto it = std::find_if(pending.inputs.begin(), pending.inputs.end(),
                                 [&](const Input& held) { return held.source == source; });
    loss.add(it->signs.loss);
    vote.inputs.push_back(it->envelope);
  }
  vote.vote.loss = loss.value();
  adversary->replace(MessageType::kVote, {round, &vote.vote.model_digest, &vote.vote.signs, nullptr});
  return send_vote(pending.start, encode(vote));
}

}  // namespace ballot::runtime

#include "runtime/experiment.h"

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "coding/codec_registry.h"
#include "coding/global_topk.h"
#include "robust/registry.h"
#include "runtime/adversary.h"
#include "runtime/detail/lockstep_network.h"
#include "runtime/detail/memory_cluster.h"
#include "runtime/messages.h"
#include "runtime/node_attacks.h"
#include "runtime/node_session.h"
#include "runtime/node_worker.h"
#include "runtime/replica.h"
#include "runtime/server_session.h"

namespace ballot::runtime {
namespace {

using Clock = std::chrono::steady_clock;

std::size_t differing_bits(const BitVector& a, const BitVector& b) {
  std::size_t count = 0;
  for (std::size_t w = 0; w < a.words().size(); ++w) count += std::popcount(a.words()[w] ^ b.words()[w]);
  return count;
}

// Signs as −1, 0 or +1 (NaN as 0): a sparse aggregate (top-k, global top-k) differs from the
// reference also where one of them is 0 and the other is not.
std::size_t differing_signs(std::span<const float> a, std::span<const float> b) {
  const auto sign = [](float x) { return (x > 0.0f) - (x < 0.0f); };
  std::size_t count = 0;
  for (std::size_t k = 0; k < a.size(); ++k) count += sign(a[k]) != sign(b[k]);
  return count;
}

Error stalled(std::uint64_t round, const TrainingSetup& setup, const Error& cause) {
  const auto n = setup.options.nodes;
  const auto b = setup.options.byzantine;
  return make_error(ErrorCode::kUnavailable,
                    "round " + std::to_string(round) + ": fewer than the quorum of n - b = " + std::to_string(n - b) +
                        " votes arrived, so more are absent than the fault budget b = " + std::to_string(b) +
                        " allows; the server would wait for a quorum that never comes (" + cause.message + ")");
}

// The per-run state of the engine: the server session and n node sessions on one thread, over the
// in-memory network with virtual time (runtime/detail/lockstep_network.h).
class Engine {
 public:
  Engine(const TrainingSetup& setup, std::chrono::milliseconds round_deadline)
      : setup_(setup), n_(setup.options.nodes), round_deadline_(round_deadline) {}

  Status init() {
    BALLOT_ASSIGN_OR_RETURN(auto server_replica, Replica::create(setup_));
    server_replica_ = std::make_unique<Replica>(std::move(server_replica));
    quarantine_ = std::make_shared<Quarantine>();
    BALLOT_ASSIGN_OR_RETURN(auto cluster, detail::make_memory_cluster(setup_, quarantine_));
    server_endpoint_ = std::make_shared<detail::LockstepEndpoint>(time_, std::move(cluster.endpoints[kServerId]),
                                                                  /*drives_time=*/true);
    ServerSessionOptions server_options;
    server_options.round_deadline = round_deadline_;
    server_options.quarantine = quarantine_;
    server_options.registry = cluster.registry;
    server_options.clock = server_endpoint_;
    exchange_wait_ = std::chrono::milliseconds(
                         static_cast<std::int64_t>(NodeSessionOptions{}.exchange_input_fraction *
                                                   static_cast<double>(server_options.round_deadline.count()))) +
                     std::chrono::milliseconds(1);
    server_ = std::make_unique<ServerSession>(setup_, *server_endpoint_, *server_replica_, server_options);
    // The honest messages of each round, computed once on the server's replica (the same model as
    // every node's); the attackers' seam reads the same view.
    coalition_ = std::make_shared<Coalition>(setup_);
    const bool data_attack = setup_.attack.find(attacks::Domain::kData) != nullptr;
    nodes_.resize(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      Participant& node = nodes_[i];
      BALLOT_ASSIGN_OR_RETURN(auto replica, Replica::create(setup_));
      node.replica = std::make_unique<Replica>(std::move(replica));
      node.endpoint =
          std::make_shared<detail::LockstepEndpoint>(time_, std::move(cluster.endpoints[node_id(i)]), false);
      NodeSessionOptions options;
      options.evidence = cluster.evidence[node_id(i)];
      options.adversary = make_node_adversary(setup_, i, *node.replica, coalition_);
      options.clock = node.endpoint;
      node.session = std::make_unique<NodeSession>(setup_, i, *node.endpoint, *node.replica, options);
      // A label-flipping attacker trains on its own flipped labels, as a Node does.
      if (data_attack && setup_.is_byzantine(i)) node.own_worker.emplace(setup_, i);
    }
    if (!setup_.sign_vote()) {
      BALLOT_ASSIGN_OR_RETURN(reference_aggregator_, robust::make_aggregator(setup_.options.rule));
      BALLOT_ASSIGN_OR_RETURN(reference_codec_, coding::make_codec(setup_.options.codec));
      for (std::size_t i = 0; i < n_; ++i) {
        BALLOT_ASSIGN_OR_RETURN(auto codec, coding::make_codec(setup_.options.codec));
        shadow_codecs_.push_back(std::move(codec));
      }
    }
    for (auto& node : nodes_) BALLOT_TRY(node.session->start());
    return server_->begin(0);
  }

  Result<ExperimentRound> round(std::uint64_t r) {
    BALLOT_TRY(server_->open_round(r));
    const auto shared_view = coalition_->view(*server_replica_, r);
    const RoundView& view = *shared_view;
    std::vector<std::uint64_t> votes_before(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      if (nodes_[i].session) votes_before[i] = nodes_[i].session->stats().votes_sent;
      BALLOT_TRY(drive(i, view, std::chrono::milliseconds(0)));
    }
    if (exchange()) {
      // The inputs of every row are sent: each node votes over them, or waits for the missing ones
      // until its input deadline.
      for (std::size_t i = 0; i < n_; ++i) {
        BALLOT_TRY(drive(i, view, std::chrono::milliseconds(0)));
        if (nodes_[i].session && nodes_[i].session->stats().votes_sent == votes_before[i])
          BALLOT_TRY(drive(i, view, exchange_wait_));
      }
    }
    if (auto collected = server_->collect(); !collected.ok()) {
      if (collected.error().code == ErrorCode::kTimeout) return stalled(r, setup_, collected.error());
      return std::move(collected).error();
    }
    BALLOT_ASSIGN_OR_RETURN(auto decision, server_->decide());
    const RoundReport& server_report = server_->report();
    ExperimentRound report;
    report.round = r;
    report.votes = server_report.votes;
    report.mean_loss = server_report.mean_loss;
    report.rejected_messages = server_report.rejected_messages;
    report.decision_bytes = server_report.bytes_per_decision;
    report.seconds = server_report.vote_wait_seconds;  // on the session clock: virtual
    defences_.rejected_messages += server_report.rejected_messages;
    defences_.out_of_sync_votes += server_report.out_of_sync.size();
    BALLOT_ASSIGN_OR_RETURN(report.changed_coordinates, changed_by_the_attack(r, view, decision));
    BALLOT_TRY(server_->send_decision(std::move(decision)));
    server_->apply_decision();
    const std::uint64_t done = r + 1;
    const auto every = setup_.options.eval_every;
    if (done == setup_.options.rounds || (every != 0 && done % every == 0)) {
      report.evaluated = true;
      report.test = server_replica_->evaluate(setup_.data->test, setup_.options.eval_examples);
    }
    return report;
  }

  Replica& replica() { return *server_replica_; }
  DefenceReport defences() const {
    DefenceReport report = defences_;
    add_quarantine_report(*quarantine_, n_, report);
    return report;
  }

 private:
  struct Participant {
    std::unique_ptr<Replica> replica;
    std::shared_ptr<detail::LockstepEndpoint> endpoint;
    std::unique_ptr<NodeSession> session;  // null once the node crashed for good
    std::optional<NodeWorker> own_worker;  // a label-flipping attacker's
  };

  bool exchange() const { return setup_.options.placement == Placement::kExchange && setup_.sign_vote(); }

  // Node i handles what has arrived (and waits up to `wait` of its own time), computing the work
  // its session hands out from the round's view.
  Status drive(std::size_t i, const RoundView& view, std::chrono::milliseconds wait) {
    Participant& node = nodes_[i];
    if (!node.session) {
      // Crashed for good: what is sent to it is read and dropped, so its inbox does not grow.
      while (node.endpoint->receive(std::chrono::milliseconds(0)).ok()) {
      }
      return {};
    }
    while (node.session) {
      BALLOT_ASSIGN_OR_RETURN(auto event, node.session->poll_for(wait));
      if (!event) return {};
      wait = std::chrono::milliseconds(0);
      switch (event->kind) {
        case NodeEvent::Kind::kCompute:
          BALLOT_TRY(submit(node, i, event->work, view));
          break;
        case NodeEvent::Kind::kCrashed:
          // Gone for good: its process would exit.
          node.session.reset();
          return {};
        case NodeEvent::Kind::kFinished:
          return {};
        case NodeEvent::Kind::kDecided:
        case NodeEvent::Kind::kStateInstalled:
          break;
      }
    }
    return {};
  }

  // What node i's worker computes: the round's honest view (each partition computed once for all
  // the nodes that hold it), or an attacker's own work on flipped labels.
  Status submit(Participant& node, std::size_t i, const RoundWork& work, const RoundView& view) {
    // Work of an earlier round (a node catching up after a crash): it would be late; sends nothing.
    if (work.round != view.round) return {};
    NodeSession& session = *node.session;
    if (work.kind == RoundWork::Kind::kPartitionSigns) {
      const auto partition = work.partitions.front();
      if (node.own_worker) {
        BitVector signs;
        const double loss = node.own_worker->partition_signs(*node.replica, work.round, partition, signs);
        return session.submit_partition_signs(loss, std::move(signs));
      }
      return session.submit_partition_signs(view.partition_losses[partition], view.partition_signs[partition]);
    }
    if (work.kind == RoundWork::Kind::kVote) {
      if (node.own_worker) {
        BitVector signs;
        const double loss = node.own_worker->vote(*node.replica, work.round, signs);
        return session.submit_vote(loss, std::move(signs));
      }
      return session.submit_vote(view.losses[i], view.honest_votes[i]);
    }
    if (node.own_worker) {
      const double loss = node.own_worker->gradient(*node.replica, work.round);
      return session.submit_gradient(loss, node.replica->model().gradients());
    }
    return session.submit_gradient(view.losses[i], view.gradients[i]);
  }

  // Sign path: the coordinates where the applied decision differs from the majority of every
  // node's honest vote. Gradient path: the coordinates whose sign differs between the applied
  // aggregate and the rule over every node's honest message (each through its codec).
  Result<std::size_t> changed_by_the_attack(std::uint64_t r, const RoundView& view,
                                            const std::vector<std::uint8_t>& decision) {
    const std::size_t d = server_replica_->dimension();
    if (setup_.sign_vote()) {
      BALLOT_ASSIGN_OR_RETURN(auto applied, decode_decision(decision, d));
      std::vector<const BitVector*> honest;
      for (const auto& vote : view.honest_votes) honest.push_back(&vote);
      return differing_bits(applied.signs, decide(honest, d));
    }
    BALLOT_ASSIGN_OR_RETURN(auto applied, decode_float_decision(decision, d));
    const auto& layout = server_replica_->model().layout();
    std::vector<std::vector<float>> attack_free;
    for (std::size_t i = 0; i < n_; ++i) {
      Rng rng = codec_rng(setup_, r, i);
      const auto encoded = shadow_codecs_[i]->encode(view.gradients[i], layout, rng);
      BALLOT_ASSIGN_OR_RETURN(auto decoded, reference_codec_->decode(encoded.bytes, layout));
      attack_free.push_back(std::move(decoded));
    }
    BALLOT_ASSIGN_OR_RETURN(auto inputs, robust::InputMatrix::from_rows(attack_free));
    BALLOT_ASSIGN_OR_RETURN(auto reference, reference_aggregator_->aggregate(inputs));
    if (const auto* gtopk = dynamic_cast<const coding::GlobalTopKCodec*>(reference_codec_.get())) {
      // As the server and the nodes do: the update is the global set, which the twins then take.
      coding::keep_global_top_k(reference.value, layout, gtopk->options());
      const auto global = coding::global_set_of(reference.value, layout, gtopk->granularity());
      for (auto& codec : shadow_codecs_) {
        BALLOT_TRY(static_cast<coding::GlobalTopKCodec&>(*codec).accept_global(global.bytes, layout));
      }
    }
    return differing_signs(applied.direction, reference.value);
  }

  const TrainingSetup& setup_;
  const std::size_t n_;
  const std::chrono::milliseconds round_deadline_;
  detail::LockstepTime time_;
  std::shared_ptr<Quarantine> quarantine_;
  DefenceReport defences_;  // the server's counts so far
  std::unique_ptr<Replica> server_replica_;
  std::shared_ptr<detail::LockstepEndpoint> server_endpoint_;
  std::unique_ptr<ServerSession> server_;
  std::chrono::milliseconds exchange_wait_{0};
  std::shared_ptr<Coalition> coalition_;
  std::vector<Participant> nodes_;
  // The attack-free reference of the gradient path: every node's honest message through its own
  // codec twin (error feedback included), decoded and aggregated.
  std::unique_ptr<robust::Aggregator> reference_aggregator_;
  std::unique_ptr<coding::Codec> reference_codec_;
  std::vector<std::unique_ptr<coding::Codec>> shadow_codecs_;
};

}  // namespace

std::string experiment_json_line(const ExperimentRound& round) {
  nlohmann::json line = {{"round", round.round},
                         {"votes", round.votes},
                         {"loss", round.mean_loss},
                         {"changed_coordinates", round.changed_coordinates}};
  if (round.evaluated) {
    line["test_accuracy"] = round.test.accuracy;
    line["test_loss"] = round.test.loss;
  }
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<ExperimentResult> run_experiment(const TrainingSetup& setup, const ExperimentOptions& options) {
  const auto started = Clock::now();
  Engine engine(setup, options.round_deadline);
  BALLOT_TRY(engine.init());
  ExperimentResult result;
  for (std::uint64_t r = 0; r < setup.options.rounds; ++r) {
    BALLOT_ASSIGN_OR_RETURN(auto report, engine.round(r));
    if (report.changed_coordinates > 0) ++result.rounds_changed;
    result.rounds.push_back(report);
    if (options.on_round) options.on_round(report);
    if (options.cancelled && options.cancelled()) break;
  }
  result.test = engine.replica().evaluate(setup.data->test, setup.data->test.size());
  result.model_digest = engine.replica().digest();
  result.defences = engine.defences();
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

}  // namespace ballot::runtime

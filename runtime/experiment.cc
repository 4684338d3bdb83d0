#include "runtime/experiment.h"

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "coding/codec_registry.h"
#include "robust/registry.h"
#include "runtime/adversary.h"
#include "runtime/node_attacks.h"

namespace ballot::runtime {
namespace {

using Clock = std::chrono::steady_clock;

std::size_t differing_bits(const BitVector& a, const BitVector& b) {
  std::size_t count = 0;
  for (std::size_t w = 0; w < a.words().size(); ++w) count += std::popcount(a.words()[w] ^ b.words()[w]);
  return count;
}

std::size_t differing_signs(std::span<const float> a, std::span<const float> b) {
  std::size_t count = 0;
  for (std::size_t k = 0; k < a.size(); ++k) count += (a[k] < 0) != (b[k] < 0);
  return count;
}

Error stalled(std::uint64_t round, std::size_t absent, std::size_t budget) {
  return make_error(ErrorCode::kUnavailable,
                    "round " + std::to_string(round) + ": " + std::to_string(absent) +
                        " votes are absent but the fault budget is b = " + std::to_string(budget) +
                        "; the server would wait for a quorum that never comes");
}

// The per-run state of the engine.
class Engine {
 public:
  Engine(const TrainingSetup& setup, Replica replica)
      : setup_(setup), replica_(std::move(replica)), coalition_(std::make_shared<Coalition>(setup)) {}

  Status init() {
    const std::size_t n = setup_.options.nodes;
    data_attack_ = setup_.attack.find(attacks::Domain::kData) != nullptr;
    // Each attacker's content goes through the node session's seam (runtime/node_attacks.h), fed
    // by the engine's own view of the honest messages.
    for (auto node : setup_.byzantine)
      adversaries_.emplace(node, make_node_adversary(setup_, node, replica_, coalition_));
    if (data_attack_) {
      for (auto node : setup_.byzantine) own_workers_.emplace(node, NodeWorker(setup_, node));
    }
    if (!setup_.sign_vote()) {
      for (int copy = 0; copy < 2; ++copy) {
        BALLOT_ASSIGN_OR_RETURN(aggregators_[copy], robust::make_aggregator(setup_.options.rule));
      }
      BALLOT_ASSIGN_OR_RETURN(server_codec_, coding::make_codec(setup_.options.codec));
      for (std::size_t i = 0; i < n; ++i) {
        BALLOT_ASSIGN_OR_RETURN(auto codec, coding::make_codec(setup_.options.codec));
        codecs_.push_back(std::move(codec));
      }
      for (auto node : setup_.byzantine) {
        BALLOT_ASSIGN_OR_RETURN(auto codec, coding::make_codec(setup_.options.codec));
        shadow_codecs_.emplace(node, std::move(codec));
      }
    }
    return {};
  }

  Result<ExperimentRound> round(std::uint64_t r) {
    ExperimentRound report;
    report.round = r;
    const auto shared_view = coalition_->view(replica_, r);
    const RoundView& view = *shared_view;
    BALLOT_ASSIGN_OR_RETURN(report, setup_.sign_vote() ? vote_round(r, view) : gradient_round(r, view));
    const std::uint64_t done = r + 1;
    const auto every = setup_.options.eval_every;
    if (done == setup_.options.rounds || (every != 0 && done % every == 0)) {
      report.evaluated = true;
      report.test = replica_.evaluate(setup_.data->test, setup_.options.eval_examples);
    }
    return report;
  }

  Replica& replica() { return replica_; }

 private:
  // The vote a node sends this round, or nullopt when it sends none the server would count.
  bool sends(std::size_t node, std::uint64_t r) const {
    return !setup_.is_byzantine(node) || !protocol_suppresses_vote(setup_, node, r);
  }
  // A crashed node computes nothing (a Node under the crash attack ignores the round), while the
  // other protocol attacks compute and encode the vote and then withhold or spoil it.
  bool crashed(std::size_t node, std::uint64_t r) const {
    const auto it = adversaries_.find(node);
    return it != adversaries_.end() && it->second->silence(r) != NodeAdversary::Silence::kNone;
  }

  Result<ExperimentRound> vote_round(std::uint64_t r, const RoundView& view) {
    const std::size_t n = setup_.options.nodes;
    ExperimentRound report;
    report.round = r;
    std::vector<BitVector> sent(n);
    std::vector<const BitVector*> counted;
    double loss = 0;
    for (std::size_t i = 0; i < n; ++i) {
      double node_loss = view.losses[i];
      if (setup_.is_byzantine(i)) {
        // The attacker computes its own vote every round it is up (its momentum advances even
        // when it sends nothing), exactly as a Node does.
        if (crashed(i, r)) continue;
        if (auto own = own_workers_.find(i); own != own_workers_.end()) {
          node_loss = own->second.vote(replica_, r, sent[i]);
        } else {
          sent[i] = view.honest_votes[i];
        }
        if (!sends(i, r)) continue;
        adversaries_.at(i)->replace(transport::MessageType::kVote, {r, nullptr, &sent[i], nullptr});
        counted.push_back(&sent[i]);
      } else {
        counted.push_back(&view.honest_votes[i]);
      }
      loss += node_loss;
    }
    if (n - counted.size() > setup_.options.byzantine) return stalled(r, n - counted.size(), setup_.options.byzantine);
    const std::size_t d = replica_.dimension();
    const BitVector decision = decide(counted, d);
    std::vector<const BitVector*> honest;
    for (const auto& vote : view.honest_votes) honest.push_back(&vote);
    report.changed_coordinates = differing_bits(decision, decide(honest, d));
    report.votes = counted.size();
    report.mean_loss = counted.empty() ? 0.0 : loss / static_cast<double>(counted.size());
    replica_.apply(r, decision);
    return report;
  }

  Result<ExperimentRound> gradient_round(std::uint64_t r, const RoundView& view) {
    const std::size_t n = setup_.options.nodes;
    const auto& layout = replica_.model().layout();
    ExperimentRound report;
    report.round = r;
    std::vector<std::vector<float>> decoded;
    std::vector<std::vector<float>> attack_free;
    std::vector<float> message;
    double loss = 0;
    for (std::size_t i = 0; i < n; ++i) {
      double node_loss = view.losses[i];
      const bool byzantine = setup_.is_byzantine(i);
      if (byzantine) {
        BALLOT_ASSIGN_OR_RETURN(auto honest, encode_decode(*shadow_codecs_.at(i), view.gradients[i], r, i));
        attack_free.push_back(std::move(honest));
        if (crashed(i, r)) continue;
        if (auto own = own_workers_.find(i); own != own_workers_.end()) {
          node_loss = own->second.gradient(replica_, r, message);
        } else {
          message = view.gradients[i];
        }
        adversaries_.at(i)->replace(transport::MessageType::kVote, {r, nullptr, nullptr, &message});
      } else {
        message = view.gradients[i];
      }
      // Encoded before the protocol attack decides whether it is sent, as at a Node: a stateful
      // codec's memory (error feedback) advances either way.
      BALLOT_ASSIGN_OR_RETURN(auto received, encode_decode(*codecs_[i], message, r, i));
      if (!sends(i, r)) continue;
      if (!byzantine) attack_free.push_back(received);
      decoded.push_back(std::move(received));
      loss += node_loss;
    }
    if (n - decoded.size() > setup_.options.byzantine) return stalled(r, n - decoded.size(), setup_.options.byzantine);
    BALLOT_ASSIGN_OR_RETURN(auto inputs, robust::InputMatrix::from_rows(decoded));
    BALLOT_ASSIGN_OR_RETURN(auto aggregated, aggregators_[0]->aggregate(inputs));
    BALLOT_ASSIGN_OR_RETURN(auto reference_inputs, robust::InputMatrix::from_rows(attack_free));
    BALLOT_ASSIGN_OR_RETURN(auto reference, aggregators_[1]->aggregate(reference_inputs));
    report.changed_coordinates = differing_signs(aggregated.value, reference.value);
    report.votes = decoded.size();
    report.mean_loss = decoded.empty() ? 0.0 : loss / static_cast<double>(decoded.size());
    (void)layout;
    replica_.apply(r, std::span<const float>(aggregated.value));
    return report;
  }

  // What the server decodes from node `node`'s message, as the real server would.
  Result<std::vector<float>> encode_decode(coding::Codec& codec, std::span<const float> gradient, std::uint64_t r,
                                           std::size_t node) {
    const auto& layout = replica_.model().layout();
    Rng rng = codec_rng(setup_, r, node);
    const auto encoded = codec.encode(gradient, layout, rng);
    return server_codec_->decode(encoded.bytes, layout);
  }

  const TrainingSetup& setup_;
  Replica replica_;
  std::shared_ptr<Coalition> coalition_;  // the honest messages of each round (all of them, for the report)
  std::map<std::size_t, std::shared_ptr<NodeAdversary>> adversaries_;  // per Byzantine node
  bool data_attack_ = false;
  std::map<std::size_t, NodeWorker> own_workers_;       // label-flipping attackers' own workers
  std::unique_ptr<robust::Aggregator> aggregators_[2];  // applied, attack-free reference
  std::unique_ptr<coding::Codec> server_codec_;
  std::vector<std::unique_ptr<coding::Codec>> codecs_;                   // per node (EF state)
  std::map<std::size_t, std::unique_ptr<coding::Codec>> shadow_codecs_;  // attackers' honest twins
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
  if (setup.options.placement == Placement::kExchange && (setup.attack.find(attacks::Domain::kData) != nullptr ||
                                                          setup.attack.find(attacks::Domain::kProtocol) != nullptr)) {
    // Those attacks change what a source sends to its column (flipped, absent or equivocating
    // partition signs), which this engine does not model; votes-only attacks it does.
    return make_error(ErrorCode::kUnavailable,
                      "the lockstep engine runs the exchange placement only with vote attacks (sign domain); attack '" +
                          setup.options.attack + "' acts on the partition signs a source relays: use simulate()");
  }
  BALLOT_ASSIGN_OR_RETURN(Replica replica, Replica::create(setup));
  Engine engine(setup, std::move(replica));
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
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

}  // namespace ballot::runtime

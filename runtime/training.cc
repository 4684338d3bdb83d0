#include "runtime/training.h"

#include <algorithm>

#include "attacks/targets.h"
#include "coding/codec_registry.h"
#include "coding/dgc.h"
#include "core/enforce.h"
#include "core/spec.h"
#include "learning/models.h"
#include "robust/registry.h"
#include "runtime/messages.h"

namespace ballot::runtime {

std::span<const PlacementEntry> placement_table() {
  static const PlacementEntry table[] = {
      {"replicated", "", "replicated", "node i computes every partition of its row of G (Sohn et al. 2020)",
       Placement::kReplicated},
      {"exchange", "", "exchange",
       "node j computes partition j and sends its signed signs to the nodes of column j, which vote over them",
       Placement::kExchange},
  };
  return table;
}

Result<Placement> parse_placement(std::string_view name) {
  const auto table = placement_table();
  if (const auto* entry = find_entry(table, name)) return entry->make;
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown placement '" + std::string(name) + "' (known: " + joined_names(table) + ")");
}

std::string_view placement_name(Placement placement) {
  for (const auto& entry : placement_table())
    if (entry.make == placement) return entry.name;
  return "unknown";
}

namespace {

Error bad_option(const std::string& what) { return make_error(ErrorCode::kInvalidArgument, what); }

// "deterministic" alone takes b from the run's fault budget.
Result<Spec> code_spec(const TrainingOptions& options) {
  BALLOT_ASSIGN_OR_RETURN(Spec spec, Spec::parse(options.code));
  if (spec.name() == "deterministic" && !spec.has("b")) {
    return Spec::parse("deterministic:b=" + std::to_string(options.byzantine));
  }
  return spec;
}

}  // namespace

Status TrainingOptions::validate() const {
  if (nodes == 0 || nodes > coding::AllocationMatrix::kMaxNodes) {
    return bad_option("nodes must be in [1, " + std::to_string(coding::AllocationMatrix::kMaxNodes) + "]");
  }
  if (2 * byzantine >= nodes) {
    return bad_option("the fault budget b = " + std::to_string(byzantine) +
                      " needs b < n/2 (n = " + std::to_string(nodes) + ")");
  }
  if (partition_size == 0 || partition_size > kMaxPartitionSize)
    return bad_option("partition size must be in [1, 2^24], not " + std::to_string(partition_size));
  if (rounds == 0 || rounds > kMaxRounds)
    return bad_option("rounds must be in [1, 2^48], not " + std::to_string(rounds));
  if (digest_every == 0)
    return bad_option("digest_every must be at least 1 (1: the full parameter digest every round)");
  if (!(worker_momentum >= 0.0 && worker_momentum < 1.0)) return bad_option("worker momentum must be in [0, 1)");
  if (placement == Placement::kExchange && rule != "vote") {
    return bad_option("placement 'exchange' relays 1-bit partition signs through G: it needs rule 'vote' (rule '" +
                      rule + "' sends each node's own gradient to the server already)");
  }
  BALLOT_TRY(code_spec(*this));
  BALLOT_TRY(Spec::parse(model));
  BALLOT_TRY(learning::LrSchedule::parse(lr));
  BALLOT_TRY(Spec::parse(data));
  BALLOT_ASSIGN_OR_RETURN(auto adversary, attacks::AttackSpec::parse(attack));
  if (rule == "vote" && codec != TrainingOptions{}.codec) {
    // Without this a typo'd --rule, or a forgotten one, would train on 1-bit votes while the
    // user believes the codec is in use.
    return bad_option("codec '" + codec +
                      "' applies to the gradient path only: rule 'vote' sends 1-bit signs "
                      "through the election code (choose a robust rule, e.g. --rule median, to use a codec, or leave "
                      "the codec at fp32)");
  }
  if (rule != "vote") {
    BALLOT_ASSIGN_OR_RETURN(auto aggregator, robust::make_aggregator(rule));
    // The server decides with anything between n − b and n inputs: the rule must accept both.
    BALLOT_TRY(aggregator->check(nodes - byzantine));
    BALLOT_TRY(aggregator->check(nodes));
    BALLOT_TRY(coding::make_codec(codec));
    // DGC corrects momentum at the node (u ← m·u + g, sent from v ← v + u): a server rule with
    // momentum of its own would apply it a second time, which the paper's receiver does not.
    BALLOT_ASSIGN_OR_RETURN(const Spec codec_spec, Spec::parse(codec));
    BALLOT_ASSIGN_OR_RETURN(const Spec update_spec, Spec::parse(update));
    const std::string& rule_name = update_spec.name();
    BALLOT_ASSIGN_OR_RETURN(const double server_momentum,
                            rule_name == "signum"
                                ? update_spec.get_double("beta", 0.9)
                                : update_spec.get_double("momentum", rule_name == "heavyball" ? 0.9 : 0.0));
    const bool has_momentum =
        (rule_name == "sgd" || rule_name == "heavyball" || rule_name == "signum") && server_momentum > 0.0;
    BALLOT_ASSIGN_OR_RETURN(const double node_momentum,
                            codec_spec.get_double("momentum", coding::DgcOptions{}.momentum));
    if (codec_spec.name() == "dgc" && node_momentum > 0.0 && has_momentum) {
      return bad_option("codec '" + codec + "' corrects momentum at the node; update '" + update +
                        "' would apply momentum a second time: use update 'sgd' (momentum 0), as DGC's receiver "
                        "does, or dgc:momentum=0");
    }
    if (adversary.find(attacks::Domain::kSign) != nullptr) {
      return bad_option("attack '" + attack + "': sign-domain attacks act on 1-bit votes; with rule '" + rule +
                        "' use a gradient-domain attack (e.g. sign_flip instead of reverse)");
    }
  }
  if (attackers > nodes) return bad_option("more attackers than nodes");
  std::size_t attacking = attackers;
  if (attacker_choice != "random" && attacker_choice != "worst") {
    BALLOT_ASSIGN_OR_RETURN(auto indices, attacks::parse_indices(attacker_choice, nodes));
    if (attackers != 0 && indices.size() != attackers) {
      return bad_option("attacker_choice lists " + std::to_string(indices.size()) +
                        " nodes but attackers = " + std::to_string(attackers));
    }
    attacking = indices.size();
  }
  const auto* sign = adversary.find(attacks::Domain::kSign);
  const bool omniscient = adversary.find(attacks::Domain::kGradient) != nullptr ||
                          (sign != nullptr && sign->kind == attacks::AttackKind::kOmniscient);
  if (omniscient && attacking >= nodes) {
    return bad_option("attack '" + attack +
                      "' crafts its messages from the honest ones: at least one node must be honest");
  }
  return {};
}

Result<learning::TrainTestSplit> load_training_data(const TrainingOptions& options) {
  BALLOT_ASSIGN_OR_RETURN(Spec spec, Spec::parse(options.data));
  if (spec.name() == "fashion-mnist" || spec.name() == "mnist") {
    BALLOT_TRY(spec.check_known({"dir"}));
    const std::string dir = spec.get_string("dir", std::string(learning::kDefaultFashionMnistDir));
    return learning::load_mnist_dir(dir);
  }
  if (spec.name() == "synthetic") {
    BALLOT_TRY(spec.check_known({"examples", "features", "classes", "separation", "noise", "seed"}));
    learning::SyntheticOptions synthetic;
    BALLOT_ASSIGN_OR_RETURN(auto examples, spec.get_int("examples", 4096));
    BALLOT_ASSIGN_OR_RETURN(auto features, spec.get_int("features", 32));
    BALLOT_ASSIGN_OR_RETURN(auto classes, spec.get_int("classes", 10));
    BALLOT_ASSIGN_OR_RETURN(synthetic.separation, spec.get_double("separation", 1.5));
    BALLOT_ASSIGN_OR_RETURN(synthetic.noise, spec.get_double("noise", 1.0));
    BALLOT_ASSIGN_OR_RETURN(auto seed, spec.get_int("seed", static_cast<std::int64_t>(options.seed)));
    if (examples <= 0 || features <= 0 || classes <= 0) return bad_option("synthetic sizes must be positive");
    // At most 2^30 floats of examples (4 GiB), so that a typo is an error rather than an allocation failure.
    if (examples > (std::int64_t{1} << 28) || features > (std::int64_t{1} << 24) || classes > 256 ||
        examples * features > (std::int64_t{1} << 30))
      return bad_option("synthetic: examples ≤ 2^28, features ≤ 2^24, classes ≤ 256 and examples × features ≤ 2^30");
    synthetic.num_examples = static_cast<std::size_t>(examples);
    synthetic.num_features = static_cast<std::size_t>(features);
    synthetic.num_classes = static_cast<std::size_t>(classes);
    synthetic.seed = static_cast<std::uint64_t>(seed);
    learning::TrainTestSplit split;
    BALLOT_ASSIGN_OR_RETURN(split.train, learning::make_synthetic(synthetic));
    BALLOT_ASSIGN_OR_RETURN(split.test, learning::make_synthetic_test(synthetic, synthetic.num_examples / 4 + 1));
    return split;
  }
  if (spec.name() == "external") {
    // The examples live with the nodes' own framework (ballot.torch): Ballot samples the indices of
    // each round's partitions from the training set's size and never reads an example.
    BALLOT_TRY(spec.check_known({"train"}));
    BALLOT_ASSIGN_OR_RETURN(auto train, spec.get_int("train", 0));
    if (train <= 0 || train > (std::int64_t{1} << 28)) return bad_option("external:train=N needs N in 1..2^28");
    learning::TrainTestSplit split;
    split.train.labels.assign(static_cast<std::size_t>(train), 0);  // sizes only; no features
    return split;
  }
  return bad_option("unknown dataset '" + spec.name() + "' (known: fashion-mnist, mnist, synthetic, external)");
}

Result<coding::AllocationMatrix> make_code(const TrainingOptions& options) {
  BALLOT_ASSIGN_OR_RETURN(Spec spec, code_spec(options));
  return coding::make_allocation_matrix(spec, options.nodes, options.seed);
}

Result<std::vector<std::size_t>> choose_attackers(const TrainingOptions& options,
                                                  const coding::AllocationMatrix& code) {
  BALLOT_ASSIGN_OR_RETURN(auto attack, attacks::AttackSpec::parse(options.attack));
  if (attack.none()) return std::vector<std::size_t>{};
  return attacks::select_byzantine(options.attacker_choice, options.nodes, options.attackers, options.seed, &code);
}

Result<TrainingSetup> make_training_setup(const TrainingOptions& options,
                                          std::shared_ptr<const learning::TrainTestSplit> data) {
  BALLOT_TRY(options.validate());
  BALLOT_ENFORCE(data != nullptr);
  if (data->train.size() == 0) return bad_option("the training set is empty");
  BALLOT_ASSIGN_OR_RETURN(auto code, make_code(options));
  BALLOT_ASSIGN_OR_RETURN(auto schedule, learning::LrSchedule::parse(options.lr));
  learning::PartitionSampler sampler(learning::PartitionOptions{options.seed, options.partition_size},
                                     data->train.size());
  BALLOT_ASSIGN_OR_RETURN(auto attack, attacks::AttackSpec::parse(options.attack));
  BALLOT_ASSIGN_OR_RETURN(auto byzantine, choose_attackers(options, code));
  return TrainingSetup{options,           std::move(data),     std::move(code), std::move(sampler), std::move(schedule),
                       std::move(attack), std::move(byzantine)};
}

bool TrainingSetup::is_byzantine(std::size_t node) const {
  return std::binary_search(byzantine.begin(), byzantine.end(), node);
}

const attacks::Behaviour* TrainingSetup::active(attacks::Domain domain, std::uint64_t round) const {
  const attacks::Behaviour* behaviour = attack.find(domain);
  return behaviour != nullptr && behaviour->active(round) ? behaviour : nullptr;
}

Result<transport::FrameLimits> frame_limits(const TrainingSetup& setup) {
  BALLOT_ASSIGN_OR_RETURN(
      auto model, learning::make_model(setup.options.model, learning::shape_of(setup.data->train), setup.options.seed));
  std::size_t codec_bytes = 0;
  if (!setup.sign_vote()) {
    BALLOT_ASSIGN_OR_RETURN(auto codec, coding::make_codec(setup.options.codec));
    codec_bytes = codec->wire_size(model->layout());
  }
  return round_frame_limits(model->parameters().size(), codec_bytes, setup.sign_vote(), setup.options.nodes);
}

Rng codec_rng(const TrainingSetup& setup, std::uint64_t round, std::size_t node) {
  constexpr std::uint64_t kCodecPurpose = 0x636f646563000000ULL;  // "codec": stochastic codecs' noise
  return Rng(setup.options.seed, Rng::stream_id({round, node, kCodecPurpose}));
}

}  // namespace ballot::runtime

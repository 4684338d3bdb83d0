#include "runtime/adversary.h"

#include <algorithm>

#include "attacks/election_attack.h"
#include "attacks/gradient_attacks.h"
#include "attacks/sign_attacks.h"
#include "coding/election_encoder.h"
#include "core/enforce.h"
#include "kernels/sign_kernels.h"
#include "runtime/node_worker.h"
#include "runtime/replica.h"

namespace ballot::runtime {
namespace {

constexpr std::uint64_t kAttackPurpose = 0x61747461636b0000ULL;  // "attack": the attackers' own noise

Rng attack_rng(const TrainingSetup& setup, std::uint64_t round, std::size_t node) {
  return Rng(setup.options.seed, Rng::stream_id({round, node, kAttackPurpose}));
}

// The honest nodes' rows, for the omniscient gradient-domain attacks.
std::vector<std::size_t> honest_nodes(const TrainingSetup& setup) {
  std::vector<std::size_t> honest;
  for (std::size_t i = 0; i < setup.options.nodes; ++i) {
    if (!setup.is_byzantine(i)) honest.push_back(i);
  }
  return honest;
}

}  // namespace

HonestView::HonestView(const TrainingSetup& setup, GradientSource source)
    : setup_(&setup), worker_(NodeWorker::all_partitions(setup)) {
  worker_.set_gradient_source(std::move(source));
}

const RoundView& HonestView::compute(Replica& replica, std::uint64_t round) {
  const std::size_t n = setup_->options.nodes;
  view_.round = round;
  view_.losses.assign(n, 0.0);
  if (setup_->sign_vote()) {
    view_.partition_signs.resize(n);
    auto& partition_loss = view_.partition_losses;
    partition_loss.assign(n, 0.0);
    for (std::uint32_t j = 0; j < n; ++j) {
      partition_loss[j] = worker_.partition_signs(replica, round, j, view_.partition_signs[j]);
    }
    view_.honest_votes.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      coding::encode_replicated(setup_->code, i, view_.partition_signs, view_.honest_votes[i]);
      const auto row = setup_->code.row(i);
      for (auto j : row) view_.losses[i] += partition_loss[j];
      if (!row.empty()) view_.losses[i] /= static_cast<double>(row.size());
    }
    // The omniscient attack's messages depend only on the round's partition signs: compute them
    // once here rather than once per coalition member.
    view_.omniscient_votes.clear();
    const auto* sign = setup_->active(attacks::Domain::kSign, round);
    if (sign != nullptr && sign->kind == attacks::AttackKind::kOmniscient && !setup_->byzantine.empty()) {
      view_.omniscient_votes = attacks::omniscient_votes(setup_->code, view_.partition_signs, setup_->byzantine);
    }
  } else {
    view_.gradients.resize(n);
    for (std::uint32_t i = 0; i < n; ++i) {
      view_.losses[i] = worker_.partition_gradient(replica, round, i, view_.gradients[i]);
    }
  }
  return view_;
}

std::shared_ptr<const RoundView> Coalition::view(Replica& replica, std::uint64_t round) {
  std::lock_guard lock(mutex_);
  if (const auto it = recent_.find(round); it != recent_.end()) return it->second;
  auto computed = std::make_shared<const RoundView>(view_.compute(replica, round));
  recent_.emplace(round, computed);
  while (recent_.size() > kKeptRounds) recent_.erase(recent_.begin());
  return computed;
}

bool needs_honest_view(const TrainingSetup& setup) {
  if (setup.byzantine.empty()) return false;
  if (setup.attack.find(attacks::Domain::kGradient) != nullptr) return true;
  const auto* sign = setup.attack.find(attacks::Domain::kSign);
  return sign != nullptr && sign->kind == attacks::AttackKind::kOmniscient;
}

bool omits_vote(const TrainingSetup& setup, std::size_t node, std::uint64_t round) {
  const auto* behaviour = setup.active(attacks::Domain::kProtocol, round);
  if (behaviour == nullptr || behaviour->kind != attacks::AttackKind::kOmission || !setup.is_byzantine(node)) {
    return false;
  }
  constexpr std::uint64_t kOmissionPurpose = 0x6f6d697373696f6eULL;  // "omission"
  Rng rng(setup.options.seed, Rng::stream_id({round, node, kOmissionPurpose}));
  return rng.bernoulli(behaviour->probability);
}

std::size_t coalition_rank(const TrainingSetup& setup, std::size_t node) {
  const auto it = std::lower_bound(setup.byzantine.begin(), setup.byzantine.end(), node);
  BALLOT_ENFORCE(it != setup.byzantine.end() && *it == node);
  return static_cast<std::size_t>(it - setup.byzantine.begin());
}

void byzantine_vote(const TrainingSetup& setup, const RoundView* view, std::size_t node, std::uint64_t round,
                    BitVector& vote) {
  if (const auto* sign = setup.active(attacks::Domain::kSign, round)) {
    if (sign->kind == attacks::AttackKind::kOmniscient) {
      BALLOT_ENFORCE(view != nullptr && view->omniscient_votes.size() == setup.byzantine.size());
      vote = view->omniscient_votes[coalition_rank(setup, node)];
    } else {
      attacks::corrupt_vote(*sign, setup.options.seed, round, node, vote);
    }
    return;
  }
  if (const auto* gradient = setup.active(attacks::Domain::kGradient, round)) {
    BALLOT_ENFORCE(view != nullptr);
    // In sign space every message is a ±1 vector: the attack sees the honest votes and its own.
    const std::size_t d = vote.size();
    const auto honest = honest_nodes(setup);
    std::vector<float> rows(honest.size() * d);
    for (std::size_t k = 0; k < honest.size(); ++k) {
      kernels::unpack_signs(view->honest_votes[honest[k]], std::span<float>(rows.data() + k * d, d));
    }
    std::vector<float> own(d);
    kernels::unpack_signs(vote, own);
    attacks::GradientContext context;
    context.honest = robust::InputMatrix(rows.data(), honest.size(), d);
    context.own = own;
    context.n = setup.options.nodes;
    context.m = setup.byzantine.size();
    Rng rng = attack_rng(setup, round, node);
    attacks::craft_vote(*gradient, context, rng, vote);
  }
}

void byzantine_gradient(const TrainingSetup& setup, const RoundView* view, std::size_t node, std::uint64_t round,
                        std::vector<float>& gradient) {
  const auto* behaviour = setup.active(attacks::Domain::kGradient, round);
  if (behaviour == nullptr) return;
  BALLOT_ENFORCE(view != nullptr);
  const auto honest = honest_nodes(setup);
  std::vector<std::span<const float>> rows;
  for (auto i : honest) rows.emplace_back(view->gradients[i]);
  auto matrix = robust::InputMatrix::from_rows(rows);
  BALLOT_ENFORCE(matrix.ok());
  attacks::GradientContext context;
  context.honest = *matrix;
  const std::vector<float> own = gradient;
  context.own = own;
  context.n = setup.options.nodes;
  context.m = setup.byzantine.size();
  Rng rng = attack_rng(setup, round, node);
  attacks::craft_gradient(*behaviour, context, rng, gradient);
}

}  // namespace ballot::runtime

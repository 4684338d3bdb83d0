#include "learning/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <numbers>
#include <sstream>
#include <utility>

#include "core/byte_io.h"
#include "core/enforce.h"
#include "core/registry.h"
#include "core/spec.h"
#include "kernels/momentum.h"
#include "kernels/sign_kernels.h"
#include "kernels/sign_logic.h"
#include "kernels/update.h"

namespace ballot::learning {
namespace {

// ---- state bytes: "BOST" | version u8 | rule u8 | flags u8 | 0 u8 | count u64 | count × f32 ------
constexpr std::uint8_t kMagic[4] = {'B', 'O', 'S', 'T'};
constexpr std::uint8_t kStateVersion = 1;
constexpr std::size_t kHeaderBytes = 16;

enum class Rule : std::uint8_t { kSgd = 1, kSign = 2, kSignum = 3, kEfSign = 4, kWorkerMomentum = 5 };

const char* rule_name(Rule rule) {
  switch (rule) {
    case Rule::kSgd:
      return "sgd";
    case Rule::kSign:
      return "sign";
    case Rule::kSignum:
      return "signum";
    case Rule::kEfSign:
      return "ef_sign";
    case Rule::kWorkerMomentum:
      return "worker momentum";
  }
  return "?";
}

std::vector<std::uint8_t> encode_state(Rule rule, std::uint8_t flags, std::span<const float> values) {
  ByteWriter out;
  out.put_bytes(kMagic).put(kStateVersion).put(rule).put(flags).put(std::uint8_t{0});
  out.put(static_cast<std::uint64_t>(values.size())).put_array(values);
  return out.take();
}

struct DecodedState {
  std::uint8_t flags = 0;
  std::vector<float> values;
};

// Validates every field before copying; `allowed_flags` is the mask of meaningful flag bits.
Result<DecodedState> decode_state(std::span<const std::uint8_t> bytes, Rule rule, std::uint8_t allowed_flags,
                                  std::size_t num_params) {
  const std::string what = std::string(rule_name(rule)) + " optimizer state";
  if (bytes.size() < kHeaderBytes) {
    return make_error(ErrorCode::kMalformed,
                      what + " is " + std::to_string(bytes.size()) + " bytes, shorter than its header");
  }
  // The header is known to be there: its reads cannot fail, only its values can be wrong.
  ByteReader in(bytes, "optimizer state");
  BALLOT_ASSIGN_OR_RETURN(const auto magic, in.take_bytes(sizeof(kMagic), "magic"));
  if (!std::equal(magic.begin(), magic.end(), kMagic)) return make_error(ErrorCode::kMalformed, what + ": bad magic");
  BALLOT_ASSIGN_OR_RETURN(const auto version, in.read<std::uint8_t>("version"));
  if (version != kStateVersion) {
    return make_error(ErrorCode::kMalformed, what + ": unsupported version " + std::to_string(version));
  }
  BALLOT_ASSIGN_OR_RETURN(const auto stored_rule, in.read<std::uint8_t>("rule"));
  if (stored_rule != static_cast<std::uint8_t>(rule)) {
    return make_error(ErrorCode::kMalformed,
                      what + ": the bytes hold the state of rule " + std::to_string(stored_rule));
  }
  BALLOT_ASSIGN_OR_RETURN(const auto flags, in.read<std::uint8_t>("flags"));
  BALLOT_ASSIGN_OR_RETURN(const auto reserved, in.read<std::uint8_t>("reserved byte"));
  if ((flags & ~allowed_flags) != 0 || reserved != 0) {
    return make_error(ErrorCode::kMalformed, what + ": unknown flag bits");
  }
  BALLOT_ASSIGN_OR_RETURN(const auto count, in.read<std::uint64_t>("count"));
  if (count != 0 && count != num_params) {
    return make_error(ErrorCode::kMalformed, what + " holds " + std::to_string(count) + " values for a model of " +
                                                 std::to_string(num_params));
  }
  const std::size_t payload = in.remaining();
  if (payload % sizeof(float) != 0 || payload / sizeof(float) != count) {
    return make_error(ErrorCode::kMalformed, what + ": " + std::to_string(payload) + " payload bytes for " +
                                                 std::to_string(count) + " values");
  }
  DecodedState state;
  state.flags = flags;
  BALLOT_ASSIGN_OR_RETURN(state.values, in.read_array<float>(static_cast<std::size_t>(count), "values"));
  BALLOT_TRY(in.expect_end());
  return state;
}

// sign as ±1 by the packing rule (kernels/sign_logic.h): sign(0) = sign(−0) = sign(NaN) = +1.
inline float sign_of(float g) { return kernels::sign_bit(g) ? 1.0f : -1.0f; }
// ---- rules --------------------------------------------------------------------------------------

class Sgd final : public Optimizer {
 public:
  explicit Sgd(const SgdOptions& o, bool heavyball) : o_(o), heavyball_(heavyball) {}

  std::string spec() const override {
    return std::string(heavyball_ ? "heavyball" : "sgd") + ":momentum=" + format_number(o_.momentum) +
           ",wd=" + format_number(o_.weight_decay) + ",dampening=" + format_number(o_.dampening) +
           ",nesterov=" + (o_.nesterov ? "true" : "false");
  }

  float weight_decay() const override { return static_cast<float>(o_.weight_decay); }
  void step(std::span<float> x, std::span<const float> g, StepScale scale) override {
    BALLOT_ENFORCE_EQ(x.size(), g.size());
    const auto [buffer, first_step] = buffer_for(x.size());
    kernels::apply_update(x, g, buffer, factors(scale), first_step);
  }
  void step_vote(std::span<float> x, const BitVector& vote, StepScale scale) override {
    BALLOT_ENFORCE_EQ(x.size(), vote.size());
    const auto [buffer, first_step] = buffer_for(x.size());
    kernels::apply_update(x, vote, buffer, factors(scale), first_step);
  }

  std::vector<std::uint8_t> save_state() const override { return encode_state(Rule::kSgd, started_ ? 1 : 0, buffer_); }
  Status load_state(std::span<const std::uint8_t> bytes, std::size_t num_params) override {
    BALLOT_ASSIGN_OR_RETURN(auto state, decode_state(bytes, Rule::kSgd, 1, num_params));
    if ((state.flags & 1) != 0 && state.values.empty() && has_momentum()) {
      return make_error(ErrorCode::kMalformed, "sgd optimizer state: started but holds no momentum buffer");
    }
    started_ = (state.flags & 1) != 0;
    buffer_ = std::move(state.values);
    return {};
  }
  void reset_state() override {
    started_ = false;
    buffer_.clear();
  }
  std::optional<SgdView> sgd_view() const override { return SgdView{&o_, started_, buffer_}; }

 private:
  // As the kernels decide it: on the float32 factor.
  bool has_momentum() const { return static_cast<float>(o_.momentum) != 0.0f; }
  kernels::SgdFactors factors(StepScale scale) const {
    return {scale.lr, scale.weight_decay, static_cast<float>(o_.momentum), static_cast<float>(1.0 - o_.dampening),
            o_.nesterov};
  }
  // The momentum buffer for a step over d coordinates, and whether this is its first step (PyTorch:
  // the buffer then starts as the decayed direction, undamped); none without momentum.
  std::pair<std::span<float>, bool> buffer_for(std::size_t d) {
    const bool first_step = !started_ || buffer_.size() != d;
    started_ = true;
    if (!has_momentum()) return {{}, false};
    if (first_step) buffer_.resize(d);
    return {buffer_, first_step};
  }

  SgdOptions o_;
  bool heavyball_;
  bool started_ = false;
  std::vector<float> buffer_;
};

class SignUpdate final : public Optimizer {
 public:
  explicit SignUpdate(const SignOptions& o) : o_(o) {}
  std::string spec() const override { return "sign:wd=" + format_number(o_.weight_decay); }

  float weight_decay() const override { return static_cast<float>(o_.weight_decay); }
  void step(std::span<float> x, std::span<const float> g, StepScale scale) override {
    BALLOT_ENFORCE_EQ(x.size(), g.size());
    step_vote(x, kernels::pack_signs(g), scale);  // sign(g) by the packing rule: ±1 exactly
  }
  void step_vote(std::span<float> x, const BitVector& vote, StepScale scale) override {
    // x ← x − η(v + λx) (Bernstein et al. 2019, Alg. 1 with weight decay after the vote).
    kernels::apply_update(x, vote, {}, kernels::SgdFactors{scale.lr, scale.weight_decay}, false);
  }
  std::vector<std::uint8_t> save_state() const override { return encode_state(Rule::kSign, 0, {}); }
  Status load_state(std::span<const std::uint8_t> bytes, std::size_t num_params) override {
    BALLOT_ASSIGN_OR_RETURN(auto state, decode_state(bytes, Rule::kSign, 0, num_params));
    if (!state.values.empty()) return make_error(ErrorCode::kMalformed, "sign optimizer state holds values");
    return {};
  }
  void reset_state() override {}

 private:
  SignOptions o_;
};

class Signum final : public Optimizer {
 public:
  explicit Signum(const SignumOptions& o) : o_(o), momentum_(o.beta) {}
  std::string spec() const override {
    return "signum:beta=" + format_number(o_.beta) + ",wd=" + format_number(o_.weight_decay);
  }
  float weight_decay() const override { return static_cast<float>(o_.weight_decay); }
  void step(std::span<float> x, std::span<const float> g, StepScale scale) override {
    BALLOT_ENFORCE_EQ(x.size(), g.size());
    momentum_.update(g, signs_);
    SignUpdate({o_.weight_decay}).step_vote(x, signs_, scale);
  }
  std::vector<std::uint8_t> save_state() const override {
    auto bytes = momentum_.save_state();
    bytes[5] = static_cast<std::uint8_t>(Rule::kSignum);
    return bytes;
  }
  Status load_state(std::span<const std::uint8_t> bytes, std::size_t num_params) override {
    BALLOT_ASSIGN_OR_RETURN(auto state, decode_state(bytes, Rule::kSignum, 0, num_params));
    std::vector<std::uint8_t> inner(bytes.begin(), bytes.end());
    inner[5] = static_cast<std::uint8_t>(Rule::kWorkerMomentum);
    return momentum_.load_state(inner, num_params);
  }
  void reset_state() override { momentum_.reset_state(); }
  std::optional<SignumView> signum_view() const override { return SignumView{&o_, momentum_.momentum()}; }

 private:
  SignumOptions o_;
  WorkerMomentum momentum_;
  BitVector signs_;
};

class EfSign final : public Optimizer {
 public:
  explicit EfSign(GradientLayout layout) : layout_(std::move(layout)) {}
  std::string spec() const override { return "ef_sign"; }
  float weight_decay() const override { return 0.0f; }

  void step(std::span<float> x, std::span<const float> g, StepScale scale) override {
    BALLOT_ENFORCE_EQ(x.size(), g.size());
    BALLOT_ENFORCE_EQ(x.size(), layout_.total_size());
    const float lr = scale.lr;
    if (error_.size() != x.size()) error_.assign(x.size(), 0.0f);
    scales_.clear();
    // Karimireddy et al. 2019, Alg. 1: p = ηg + e; Δ = (‖p‖₁/d)·sign(p); x ← x − Δ; e ← p − Δ.
    for (const LayerSegment& s : layout_.layers()) {
      double l1 = 0.0;
      for (std::size_t i = s.offset; i < s.offset + s.size; ++i) {
        error_[i] = lr * g[i] + error_[i];  // e now holds p
        l1 += std::fabs(static_cast<double>(error_[i]));
      }
      const float scale = s.size == 0 ? 0.0f : static_cast<float>(l1 / static_cast<double>(s.size));
      scales_.push_back(scale);
      for (std::size_t i = s.offset; i < s.offset + s.size; ++i) {
        const float delta = scale * sign_of(error_[i]);
        x[i] -= delta;
        error_[i] -= delta;
      }
    }
  }
  std::vector<std::uint8_t> save_state() const override { return encode_state(Rule::kEfSign, 0, error_); }
  Status load_state(std::span<const std::uint8_t> bytes, std::size_t num_params) override {
    BALLOT_ASSIGN_OR_RETURN(auto state, decode_state(bytes, Rule::kEfSign, 0, num_params));
    error_ = std::move(state.values);
    scales_.clear();
    return {};
  }
  void reset_state() override {
    error_.clear();
    scales_.clear();
  }
  std::span<const float> error() const { return error_; }
  std::optional<EfSignView> ef_sign_view() const override { return EfSignView{&layout_, error_, scales_}; }

 private:
  GradientLayout layout_;
  std::vector<float> error_;
  std::vector<float> scales_;  // the last step's, one per layer
};

Status check_unit(const char* name, double v) {
  if (!(v >= 0.0 && v < 1.0)) {
    return make_error(ErrorCode::kInvalidArgument, std::string(name) + " must be in [0, 1), got " + format_number(v));
  }
  return {};
}
Status check_decay(double v) {
  if (!(v >= 0.0) || !std::isfinite(v)) {
    return make_error(ErrorCode::kInvalidArgument, "weight decay must be finite and >= 0, got " + format_number(v));
  }
  return {};
}

}  // namespace

// ---- Optimizer ----------------------------------------------------------------------------------

void Optimizer::step_vote(std::span<float> params, const BitVector& vote, StepScale scale) {
  BALLOT_ENFORCE_EQ(params.size(), vote.size());
  std::vector<float> unpacked(vote.size());
  kernels::unpack_signs(vote, unpacked);  // bit 1 → +1, bit 0 → −1
  step(params, unpacked, scale);
}

std::unique_ptr<Optimizer> make_sgd(const SgdOptions& options) { return std::make_unique<Sgd>(options, false); }
std::unique_ptr<Optimizer> make_sign_update(const SignOptions& options) {
  return std::make_unique<SignUpdate>(options);
}
std::unique_ptr<Optimizer> make_signum(const SignumOptions& options) { return std::make_unique<Signum>(options); }
std::unique_ptr<Optimizer> make_ef_sign(const GradientLayout& layout) { return std::make_unique<EfSign>(layout); }

namespace {

using Made = Result<std::unique_ptr<Optimizer>>;

Made make_sgd_family(const Spec& spec, const GradientLayout&) {
  const bool heavyball = spec.name() == "heavyball";
  const SgdOptions defaults = heavyball ? kHeavyBallVoteOptions : SgdOptions{};
  SgdOptions o;
  BALLOT_ASSIGN_OR_RETURN(o.momentum, spec.get_double("momentum", defaults.momentum));
  BALLOT_ASSIGN_OR_RETURN(o.weight_decay, spec.get_double("wd", defaults.weight_decay));
  BALLOT_ASSIGN_OR_RETURN(o.dampening, spec.get_double("dampening", defaults.dampening));
  BALLOT_ASSIGN_OR_RETURN(o.nesterov, spec.get_bool("nesterov", defaults.nesterov));
  BALLOT_TRY(check_unit("momentum", o.momentum));
  BALLOT_TRY(check_unit("dampening", o.dampening));
  BALLOT_TRY(check_decay(o.weight_decay));
  if (o.momentum != 0.0 && static_cast<float>(o.momentum) == 0.0f) {
    // The update computes in float32, where this momentum would be 0: say so rather than run
    // plain SGD under a momentum rule's name.
    return make_error(ErrorCode::kInvalidArgument,
                      "momentum " + format_number(o.momentum) + " is 0 in float32: give 0 or a larger value");
  }
  if (o.nesterov && (o.momentum == 0.0 || o.dampening != 0.0)) {
    return make_error(ErrorCode::kInvalidArgument, "nesterov needs momentum > 0 and no dampening");
  }
  return std::unique_ptr<Optimizer>(std::make_unique<Sgd>(o, heavyball));
}

Made make_sign_rule(const Spec& spec, const GradientLayout&) {
  SignOptions o;
  BALLOT_ASSIGN_OR_RETURN(o.weight_decay, spec.get_double("wd", 0.0));
  BALLOT_TRY(check_decay(o.weight_decay));
  return make_sign_update(o);
}

Made make_signum_rule(const Spec& spec, const GradientLayout&) {
  SignumOptions o;
  BALLOT_ASSIGN_OR_RETURN(o.beta, spec.get_double("beta", 0.9));
  BALLOT_ASSIGN_OR_RETURN(o.weight_decay, spec.get_double("wd", 0.0));
  BALLOT_TRY(check_unit("beta", o.beta));
  BALLOT_TRY(check_decay(o.weight_decay));
  return make_signum(o);
}

Made make_ef_sign_rule(const Spec&, const GradientLayout& layout) {
  if (layout.total_size() == 0) return make_error(ErrorCode::kInvalidArgument, "ef_sign needs a non-empty layout");
  return make_ef_sign(layout);
}

// docs/evaluation.md, "Default learning rates": the sweep these come from.
constexpr double kSignLearningRate = 0.001;
constexpr double kHeavyBallLearningRate = 0.0003;
constexpr double kSgdLearningRate = 0.3;
// Momentum smooths the step enough that a larger rate than the (1 − μ)-scaled plain one trains
// better (the sweep: 0.1 beat 0.03 at μ = 0.9); other μ take the rate measured at 0.9.
constexpr double kSgdMomentumLearningRate = 0.1;

const UpdateRuleEntry kUpdateRules[] = {
    {"sgd",
     "momentum wd dampening nesterov",
     "sgd:momentum=0.9,wd=0.0001",
     "SGD with optional momentum, dampening, Nesterov and weight decay (PyTorch's torch.optim.SGD)",
     &make_sgd_family,
     {kSgdLearningRate, kSgdMomentumLearningRate}},
    {"heavyball",
     "momentum wd dampening nesterov",
     "heavyball",
     "heavy-ball momentum 0.9 and weight decay 1e-4 on the vote: the server update of Sohn et al. 2020",
     &make_sgd_family,
     {kHeavyBallLearningRate, kHeavyBallLearningRate}},
    {"sign",
     "wd",
     "sign:wd=0",
     "x ← x − lr·(v + wd·x) on the ±1 vote v: signSGD with majority vote (Bernstein et al., ICLR 2019)",
     &make_sign_rule,
     {kSignLearningRate, kSignLearningRate}},
    {"signum",
     "beta wd",
     "signum:beta=0.9",
     "the sign of a momentum β of the gradient (Signum, Bernstein et al., ICML 2018); β = 0 is signSGD",
     &make_signum_rule,
     {kSignLearningRate, kSignLearningRate}},
    {"ef_sign",
     "",
     "ef_sign",
     "scaled sign with error feedback (Karimireddy et al., ICML 2019)",
     &make_ef_sign_rule,
     {kSgdLearningRate, kSgdLearningRate}},
};

}  // namespace

std::span<const UpdateRuleEntry> update_rule_table() { return kUpdateRules; }

Result<std::unique_ptr<Optimizer>> make_optimizer(std::string_view text, const GradientLayout& layout) {
  BALLOT_ASSIGN_OR_RETURN(auto spec, Spec::parse(text));
  const auto* entry = find_entry(update_rule_table(), spec.name());
  if (entry == nullptr) {
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown update rule '" + spec.name() + "' (known: " + joined_names(update_rule_table()) + ")");
  }
  BALLOT_TRY(spec.check_known(key_set(entry->keys)));
  return entry->make(spec, layout);
}

// ---- default learning rates ----------------------------------------------------------------------

namespace {
// Every rule decays to this fraction of its base rate by the last round.
constexpr double kDefaultCosineFloor = 0.05;
}  // namespace

Result<double> default_learning_rate(std::string_view update_spec) {
  BALLOT_ASSIGN_OR_RETURN(auto spec, Spec::parse(update_spec));
  const auto* entry = find_entry(update_rule_table(), spec.name());
  if (entry == nullptr) {
    return make_error(ErrorCode::kInvalidArgument,
                      "unknown update rule '" + spec.name() + "' (known: " + joined_names(update_rule_table()) + ")");
  }
  BALLOT_TRY(spec.check_known(key_set(entry->keys)));
  BALLOT_ASSIGN_OR_RETURN(const double momentum, spec.get_double("momentum", 0.0));
  BALLOT_TRY(check_unit("momentum", momentum));
  return momentum > 0.0 ? entry->properties.learning_rate_with_momentum : entry->properties.learning_rate;
}

Result<std::string> default_lr_schedule(std::string_view update_spec, std::uint64_t rounds) {
  if (rounds == 0) return make_error(ErrorCode::kInvalidArgument, "default_lr_schedule: rounds must be positive");
  BALLOT_ASSIGN_OR_RETURN(const double lr, default_learning_rate(update_spec));
  // Six significant digits: the schedule is shown in reports (0.01, not the 0.010000000000000002
  // that 0.1 × (1 − 0.9) is in binary).
  const auto shortest = [](double v) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.6g", v);
    return std::string(text);
  };
  return "constant:lr=" + shortest(lr) + " > cosine:rounds=" + std::to_string(rounds) +
         ",min=" + shortest(kDefaultCosineFloor);
}

// ---- worker side --------------------------------------------------------------------------------

WorkerMomentum::WorkerMomentum(double beta) : beta_(beta) {
  BALLOT_ENFORCE(beta >= 0.0 && beta < 1.0, "momentum beta must be in [0, 1)");
}

void WorkerMomentum::update(std::span<const float> gradient, BitVector& signs) {
  if (momentum_.empty()) momentum_.assign(gradient.size(), 0.0f);
  BALLOT_ENFORCE_EQ(momentum_.size(), gradient.size());
  const std::size_t d = gradient.size();
  if (signs.size() != d) signs = BitVector(d);
  // m ← βm + (1−β)g and its signs, 8192 coordinates at a time: each block is packed while the
  // cache holds it, one pass over memory instead of two.
  constexpr std::size_t kBlock = 8192;
  for (std::size_t begin = 0; begin < d; begin += kBlock) {
    const std::size_t count = std::min(kBlock, d - begin);
    const std::span<float> piece = std::span<float>(momentum_).subspan(begin, count);
    kernels::signum_momentum(piece, gradient.subspan(begin, count), beta_);
    kernels::pack_signs_at(piece, begin, signs);
  }
}

void WorkerMomentum::update_range(std::size_t dimension, std::size_t offset, std::span<const float> gradient,
                                  BitVector& signs) {
  if (momentum_.empty()) momentum_.assign(dimension, 0.0f);
  BALLOT_ENFORCE_EQ(momentum_.size(), dimension);
  BALLOT_ENFORCE(offset <= dimension && gradient.size() <= dimension - offset, "a piece inside the momentum");
  // Checked before m moves: a refused piece leaves the momentum as it was.
  const std::size_t end = offset + gradient.size();
  BALLOT_ENFORCE(offset % 64 == 0 && (end % 64 == 0 || end == dimension),
                 "a piece starts at a multiple of 64 and ends at one or at the dimension");
  const std::span<float> piece = std::span<float>(momentum_).subspan(offset, gradient.size());
  kernels::signum_momentum(piece, gradient, beta_);
  if (signs.size() != dimension) signs = BitVector(dimension);
  kernels::pack_signs_at(piece, offset, signs);
}

std::vector<std::uint8_t> WorkerMomentum::save_state() const {
  return encode_state(Rule::kWorkerMomentum, 0, momentum_);
}

Status WorkerMomentum::load_state(std::span<const std::uint8_t> bytes, std::size_t num_params) {
  BALLOT_ASSIGN_OR_RETURN(auto state, decode_state(bytes, Rule::kWorkerMomentum, 0, num_params));
  momentum_ = std::move(state.values);
  return {};
}

// ---- schedules ----------------------------------------------------------------------------------

LrSchedule& LrSchedule::warmup(std::uint64_t rounds, double start_factor) {
  BALLOT_ENFORCE_GT(rounds, 0u);
  BALLOT_ENFORCE(start_factor >= 0.0 && start_factor <= 1.0, "warm-up start factor must be in [0, 1]");
  factors_.push_back({Kind::kWarmup, rounds, start_factor, {}});
  return *this;
}

LrSchedule& LrSchedule::step(std::vector<std::uint64_t> milestones, double gamma) {
  BALLOT_ENFORCE(gamma > 0.0 && std::isfinite(gamma), "step gamma must be positive");
  BALLOT_ENFORCE(std::adjacent_find(milestones.begin(), milestones.end(), std::greater_equal<>()) == milestones.end(),
                 "milestones must increase");
  factors_.push_back({Kind::kStep, 0, gamma, std::move(milestones)});
  return *this;
}

LrSchedule& LrSchedule::cosine(std::uint64_t rounds, double min_factor) {
  BALLOT_ENFORCE_GT(rounds, 0u);
  BALLOT_ENFORCE(min_factor >= 0.0 && min_factor <= 1.0, "cosine floor must be in [0, 1]");
  factors_.push_back({Kind::kCosine, rounds, min_factor, {}});
  return *this;
}

double LrSchedule::at(std::uint64_t round) const {
  double lr = base_;
  for (const Factor& f : factors_) {
    switch (f.kind) {
      case Kind::kWarmup:
        if (round < f.rounds) {
          lr *= f.value + (1.0 - f.value) * static_cast<double>(round) / static_cast<double>(f.rounds);
        }
        break;
      case Kind::kStep:
        for (std::uint64_t m : f.milestones) {
          if (m <= round) lr *= f.value;
        }
        break;
      case Kind::kCosine: {
        const double t = static_cast<double>(std::min(round, f.rounds)) / static_cast<double>(f.rounds);
        lr *= f.value + (1.0 - f.value) * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
        break;
      }
    }
  }
  return lr;
}

std::string LrSchedule::spec() const {
  std::string s = "constant:lr=" + format_number(base_);
  for (const Factor& f : factors_) {
    switch (f.kind) {
      case Kind::kWarmup:
        s += " > warmup:rounds=" + std::to_string(f.rounds) + ",start=" + format_number(f.value);
        break;
      case Kind::kStep: {
        s += " > step:at=";
        for (std::size_t i = 0; i < f.milestones.size(); ++i) s += (i ? "/" : "") + std::to_string(f.milestones[i]);
        s += ",gamma=" + format_number(f.value);
        break;
      }
      case Kind::kCosine:
        s += " > cosine:rounds=" + std::to_string(f.rounds) + ",min=" + format_number(f.value);
        break;
    }
  }
  return s;
}

Result<LrSchedule> LrSchedule::parse(std::string_view text) {
  BALLOT_ASSIGN_OR_RETURN(auto stages, Spec::parse_pipeline(text));
  if (stages.empty() || stages[0].name() != "constant") {
    return make_error(ErrorCode::kInvalidArgument,
                      "schedule '" + std::string(text) + "' must start with constant:lr=<lr>");
  }
  BALLOT_TRY(stages[0].check_known({"lr"}));
  BALLOT_ASSIGN_OR_RETURN(const double lr, stages[0].get_double("lr", 0.01));
  // Every replica applies the rate as a float32 (StepScale): one that is not a normal float32
  // would make the parameters infinite in the first round, or leave them where they are.
  constexpr double kFloatMin = std::numeric_limits<float>::min(), kFloatMax = std::numeric_limits<float>::max();
  if (!(lr >= kFloatMin && lr <= kFloatMax)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "schedule '" + std::string(text) + "': lr must be a positive float32, in [" +
                          format_number(kFloatMin) + ", " + format_number(kFloatMax) + "]");
  }
  double peak = lr;  // the largest rate of the schedule: steps with gamma > 1 raise it
  LrSchedule schedule(lr);
  auto bad = [&](const std::string& why) {
    return make_error(ErrorCode::kInvalidArgument, "schedule '" + std::string(text) + "': " + why);
  };
  for (std::size_t k = 1; k < stages.size(); ++k) {
    const Spec& s = stages[k];
    if (s.name() == "warmup" || s.name() == "cosine") {
      const bool warm = s.name() == "warmup";
      BALLOT_TRY(s.check_known({"rounds", warm ? "start" : "min"}));
      BALLOT_ASSIGN_OR_RETURN(const auto rounds, s.get_int("rounds", 0));
      BALLOT_ASSIGN_OR_RETURN(const double factor, s.get_double(warm ? "start" : "min", 0.0));
      if (rounds <= 0) return bad(s.name() + " needs rounds > 0");
      if (!(factor >= 0.0 && factor <= 1.0)) return bad(s.name() + (warm ? " start" : " min") + " must be in [0, 1]");
      if (warm) {
        schedule.warmup(static_cast<std::uint64_t>(rounds), factor);
      } else {
        schedule.cosine(static_cast<std::uint64_t>(rounds), factor);
      }
    } else if (s.name() == "step") {
      BALLOT_TRY(s.check_known({"at", "gamma"}));
      BALLOT_ASSIGN_OR_RETURN(const double gamma, s.get_double("gamma", 0.1));
      if (!(gamma > 0.0) || !std::isfinite(gamma)) return bad("step gamma must be positive");
      const std::string at = s.get_string("at", "");
      std::vector<std::uint64_t> milestones;
      std::size_t pos = 0;
      while (pos <= at.size()) {
        const std::size_t end = std::min(at.find('/', pos), at.size());
        const std::string part = at.substr(pos, end - pos);
        bool ok = !part.empty() && part.size() <= 18;
        for (char ch : part) ok = ok && ch >= '0' && ch <= '9';
        if (!ok) return bad("step:at must be round numbers joined by '/'");
        const std::uint64_t m = std::stoull(part);
        if (!milestones.empty() && m <= milestones.back()) return bad("step milestones must increase");
        milestones.push_back(m);
        pos = end + 1;
      }
      if (gamma > 1.0) peak *= std::pow(gamma, static_cast<double>(milestones.size()));
      if (!(peak <= kFloatMax)) return bad("the largest rate, lr × gamma per milestone, is beyond float32");
      schedule.step(std::move(milestones), gamma);
    } else {
      return bad("unknown stage '" + s.name() + "' (known: warmup, step, cosine)");
    }
  }
  return schedule;
}

}  // namespace ballot::learning

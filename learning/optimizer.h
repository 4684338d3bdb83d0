// Update rules on the flat parameter buffer, the worker-side Signum transform, and learning-rate
// schedules. Formulas: docs/learning.md and ALGORITHMS.md §1–§3.
//
//   sgd        PyTorch's SGD on an fp32 aggregated gradient g (the no-defence baseline):
//              d = g + λx;  b ← μb + (1−τ)d (b = d on the first step);  x ← x − η·(nesterov ? d + μb : b)
//   heavyball  the election-coding paper's server update: sgd with μ = 0.9, λ = 1e-4 fed with the
//              vote v ∈ {±1}^d (Sohn et al. 2020, §5)
//   sign       the server side of signSGD / Signum with majority vote: x ← x − η·(v + λx), v the
//              vote (or sign(g), sign(0) = +1, for one process) (Bernstein et al. 2019)
//   signum     one process: m ← βm + (1−β)g, x ← x − η·(sign(m) + λx) (Bernstein et al. 2018)
//   ef_sign    EF-signSGD in one process: p = ηg + e, Δ = (‖p_s‖₁/d_s)·sign(p) per layer s,
//              x ← x − Δ, e ← p − Δ (Karimireddy et al. 2019, Alg. 1). In a cluster the error
//              memory lives in the workers' codec (coding::ErrorFeedback, coding/error_feedback.h,
//              fed with unscaled g); the server then applies the mean of the decoded Δ with sgd
//              at the step size η (the same for a positively homogeneous compressor).
// Worker-side Signum (momentum at the workers, ALGORITHMS.md §1) is WorkerMomentum below.
//
// Determinism: every rule is a fixed sequence of float operations per coordinate, so replicas
// that apply the same vote to the same parameters stay bit-identical (same build).
// Non-finite gradients propagate into the parameters; they never crash.
// Thread-safety: none; one optimizer per replica.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/bit_vector.h"
#include "core/gradient_layout.h"
#include "core/registry.h"
#include "core/result.h"

namespace ballot::learning {

// ---- learning-rate schedules -------------------------------------------------------------------

// η(r) = base · Π factors(r), round r counted from 0. The factors compose by multiplication:
//   warmup(W, s):    s + (1 − s)·r/W for r < W, then 1 (linear warm-up from s·base)
//   step(M, γ):      γ^|{m ∈ M : m ≤ r}| (drop by γ at each milestone)
//   cosine(T, f):    f + (1 − f)·(1 + cos(π·min(r, T)/T))/2 (from 1 down to f at round T)
// Text form, a pipeline parsed with ballot::Spec:
//   "constant:lr=0.01 > warmup:rounds=100,start=0.1 > step:at=1000/2000,gamma=0.1 > cosine:rounds=3000,min=0"
class LrSchedule {
 public:
  explicit LrSchedule(double base_lr = 0.01) : base_(base_lr) {}

  // Preconditions (BALLOT_ENFORCE): rounds > 0, factors in [0, 1], γ > 0, milestones increasing.
  LrSchedule& warmup(std::uint64_t rounds, double start_factor = 0.0);
  LrSchedule& step(std::vector<std::uint64_t> milestones, double gamma);
  LrSchedule& cosine(std::uint64_t rounds, double min_factor = 0.0);

  double base() const noexcept { return base_; }
  double at(std::uint64_t round) const;
  std::string spec() const;
  // Errors name the stage and key; the first stage must be "constant:lr=<η>" (η > 0, finite).
  static Result<LrSchedule> parse(std::string_view text);

 private:
  enum class Kind : std::uint8_t { kWarmup, kStep, kCosine };
  struct Factor {
    Kind kind;
    std::uint64_t rounds = 0;
    double value = 0.0;  // warm-up start, step gamma or cosine floor
    std::vector<std::uint64_t> milestones;
  };
  double base_;
  std::vector<Factor> factors_;
};

// ---- server-side (or single-process) update rules ------------------------------------------------

// The two numbers of one update as the arithmetic uses them (float32): the round's learning rate
// η and the weight decay λ. In a cluster the server puts their bits in the signed decision
// (runtime/messages.h) and every replica applies those, so no replica recomputes a schedule.
struct StepScale {
  float lr = 0.0f;
  float weight_decay = 0.0f;  // rules without weight decay (ef_sign) ignore it
  bool operator==(const StepScale&) const = default;
};

struct SgdOptions;
// What a copy of an sgd / heavyball rule elsewhere (ballot.torch on a GPU, through the kernels'
// twin of this code) needs to apply the same steps: the options, whether a step was taken, and
// the momentum buffer (empty before the first step with momentum; valid until the next step).
struct SgdView {
  const SgdOptions* options = nullptr;
  bool started = false;
  std::span<const float> buffer;
};

struct SignumOptions;
// The same for a signum rule: its options (β, λ) and its momentum m (empty before the first step,
// when it counts as zeros; valid until the next step).
struct SignumView {
  const SignumOptions* options = nullptr;
  std::span<const float> momentum;
};

// The same for the ef_sign rule: its layout (the layers its scales are per), its error memory e
// (empty before the first step, when it counts as zeros) and its last step's scales ‖p_s‖₁/d_s, one
// per layer (empty before a step). A copy elsewhere takes the scales from here rather than summing
// ‖p_s‖₁ itself (a sum in double, in coordinate order). Valid until the next step, load_state or
// reset_state.
struct EfSignView {
  const GradientLayout* layout = nullptr;
  std::span<const float> error;
  std::span<const float> scales;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // The registry spec that rebuilds this rule (make_optimizer), e.g. "sgd:momentum=0.9,wd=0.0001".
  virtual std::string spec() const = 0;
  // λ of this rule's spec as the update applies it (0 for a rule without weight decay).
  virtual float weight_decay() const = 0;
  // The scale of a step at learning rate `lr` (a schedule's value) with this rule's λ.
  StepScale scale(double lr) const { return {static_cast<float>(lr), weight_decay()}; }

  // One update of `params` with the aggregated `direction` (same size; BALLOT_ENFORCE) at
  // `scale`: the fp32 mean gradient for sgd, or a vote unpacked to ±1.
  virtual void step(std::span<float> params, std::span<const float> direction, StepScale scale) = 0;
  // The same with a packed vote (bit 1 → +1, bit 0 → −1, core/bit_vector.h). The default
  // unpacks and calls step(); sign rules read the bits directly. O(d).
  virtual void step_vote(std::span<float> params, const BitVector& vote, StepScale scale);
  // At learning rate `lr` with this rule's λ (one process; tests).
  void step(std::span<float> params, std::span<const float> direction, double lr) {
    step(params, direction, scale(lr));
  }
  void step_vote(std::span<float> params, const BitVector& vote, double lr) { step_vote(params, vote, scale(lr)); }

  // State for checkpoints (momentum buffers, error memory), little-endian with a header.
  virtual std::vector<std::uint8_t> save_state() const = 0;
  // Restores save_state() output for a model of `num_params` coordinates. Bytes from a file:
  // any malformation (magic, version, rule, length, flags) is kMalformed; the state is left
  // unchanged on error. Non-finite values are restored as they were saved.
  virtual Status load_state(std::span<const std::uint8_t> bytes, std::size_t num_params) = 0;
  virtual void reset_state() = 0;
  // The sgd and heavyball rules' state (SgdView); nullopt for the other rules.
  virtual std::optional<SgdView> sgd_view() const { return std::nullopt; }
  // The signum rule's state (SignumView); nullopt for the other rules.
  virtual std::optional<SignumView> signum_view() const { return std::nullopt; }
  // The ef_sign rule's state and last scales (EfSignView); nullopt for the other rules.
  virtual std::optional<EfSignView> ef_sign_view() const { return std::nullopt; }
};

struct SgdOptions {
  double momentum = 0.0;      // μ
  double weight_decay = 0.0;  // λ
  double dampening = 0.0;     // τ
  bool nesterov = false;
};
// Sohn et al. 2020's server update on the vote: heavy-ball momentum 0.9, weight decay 1e-4.
inline constexpr SgdOptions kHeavyBallVoteOptions{0.9, 1e-4, 0.0, false};

struct SignOptions {
  double weight_decay = 0.0;  // λ, added after the vote: x ← x − η(v + λx)
};

struct SignumOptions {
  double beta = 0.9;          // momentum β; 0 is signSGD
  double weight_decay = 0.0;  // λ
};

std::unique_ptr<Optimizer> make_sgd(const SgdOptions& options = {});
std::unique_ptr<Optimizer> make_sign_update(const SignOptions& options = {});
std::unique_ptr<Optimizer> make_signum(const SignumOptions& options = {});
// Per-layer scales follow `layout` (Granularity::Layer of the reference code); pass
// GradientLayout::whole(d) for one scale.
std::unique_ptr<Optimizer> make_ef_sign(const GradientLayout& layout);

// The registry: a spec naming a line of update_rule_table() below ("sgd", "heavyball", "sign",
// "signum", "ef_sign") with that line's keys. Invalid options are kInvalidArgument (μ, β, τ in
// [0, 1), λ >= 0, finite).
Result<std::unique_ptr<Optimizer>> make_optimizer(std::string_view spec, const GradientLayout& layout);

// The update rules, one table line each (core/registry.h): make_optimizer, default_learning_rate,
// the tests and docs/learning.md's list read it. `properties`: the default base learning rate
// (docs/evaluation.md's sweep), and the one with a momentum > 0 given in the spec.
struct UpdateRuleProperties {
  double learning_rate = 0.0;
  double learning_rate_with_momentum = 0.0;
};
using UpdateRuleFactory = Result<std::unique_ptr<Optimizer>> (*)(const Spec& spec, const GradientLayout& layout);
using UpdateRuleEntry = TableEntry<UpdateRuleFactory, UpdateRuleProperties>;
std::span<const UpdateRuleEntry> update_rule_table();

// ---- default learning rates ----------------------------------------------------------------------

// The base learning rate η of each update rule when nothing else is given, and its schedule: a
// cosine decay from η to 5% of η over the run's rounds. The steps of the rules differ by orders
// of magnitude (a sign rule moves every coordinate by η, sgd by η times the gradient), so one
// rate cannot serve all of them. sign, heavyball, sgd without momentum and sgd with momentum
// (measured at 0.9, used for any momentum > 0) have rates measured on Fashion-MNIST without
// attack; signum (which moves by η per coordinate) takes sign's and ef_sign (η times the
// gradient) sgd's, unmeasured: the values and the sweep are in docs/evaluation.md, "Default
// learning rates". `ballot train`'s own default (TrainingOptions::lr) does not use these.
// Errors: an update spec that does not parse, names no rule of make_optimizer or has a key
// that rule lacks.
Result<double> default_learning_rate(std::string_view update_spec);
// "constant:lr=<default_learning_rate> > cosine:rounds=<rounds>,min=0.05" (rounds > 0).
Result<std::string> default_lr_schedule(std::string_view update_spec, std::uint64_t rounds);

// ---- worker side --------------------------------------------------------------------------------

// Signum with majority vote keeps the momentum at each worker (Bernstein et al. 2019, Alg. 3):
// m ← βm + (1−β)g (kernels::signum_momentum, kernels/momentum.h: the one momentum formula, also
// coding::SignumCodec's), and the worker sends sign(m) (kernels::pack_signs). The server applies
// make_sign_update's rule.
class WorkerMomentum {
 public:
  explicit WorkerMomentum(double beta = 0.9);

  // Updates m with `gradient` (the first call sizes m, zero-initialised; later sizes must match,
  // BALLOT_ENFORCE) and writes sign(m) into `signs` (resized; sign(0) = +1, NaN → +1).
  void update(std::span<const float> gradient, BitVector& signs);
  // The same for coordinates [offset, offset + gradient.size()) of a `dimension`-long gradient, in
  // pieces as a framework's backward produces them: offset a multiple of 64, the piece ending at a
  // multiple of 64 or at `dimension` (BALLOT_ENFORCE); their signs go to `signs` (sized
  // `dimension`) at the same coordinates. Pieces that cover the gradient once update m as update.
  void update_range(std::size_t dimension, std::size_t offset, std::span<const float> gradient, BitVector& signs);
  std::span<const float> momentum() const noexcept { return momentum_; }
  // Replaces m: a driver that updated it elsewhere (ballot.torch on a GPU) hands it back.
  void assign(std::span<const float> values) { momentum_.assign(values.begin(), values.end()); }
  double beta() const noexcept { return beta_; }

  std::vector<std::uint8_t> save_state() const;
  Status load_state(std::span<const std::uint8_t> bytes, std::size_t num_params);
  void reset_state() { momentum_.clear(); }

 private:
  double beta_;
  std::vector<float> momentum_;
};

}  // namespace ballot::learning

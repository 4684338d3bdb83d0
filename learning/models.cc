#include "learning/models.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "core/enforce.h"
#include "core/rng.h"
#include "core/spec.h"
#include "learning/dataset.h"
#include "learning/parameter_model.h"

namespace ballot::learning {
namespace {

// Eigen splits a product's inner dimension into blocks sized from the CPU's caches, which it reads
// at run time; the block sizes decide the order in which each dot product is summed, and so the
// last bits of every gradient. Fixed sizes make the built-in models compute the same bits on every
// x86-64 host of a cluster (an Intel server and AMD nodes must agree: the election code compares
// the signs of honest nodes bit for bit). These are the sizes Eigen chose on the machine where the
// pinned digests were first recorded (tests/apps/pinned_digests_test.cc): a 48 KiB L1 data cache
// (with the 32 KiB of an AMD EPYC every vote-path digest differed), 2 MiB L2, 300 MiB reported L3.
const bool kFixedGemmBlocking = [] {
  Eigen::setCpuCacheSizes(48 * 1024, 2 * 1024 * 1024, std::ptrdiff_t{300} * 1024 * 1024);
  return true;
}();

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMat>;
using ConstMatMap = Eigen::Map<const RowMat>;
using VecMap = Eigen::Map<Eigen::RowVectorXf>;
using ConstVecMap = Eigen::Map<const Eigen::RowVectorXf>;

// The flat parameter and gradient buffers with their layout; subclasses add tensors in order.
class FlatModel : public Model {
 public:
  const GradientLayout& layout() const override { return layout_; }
  std::span<float> parameters() override { return params_; }
  std::span<const float> parameters() const override { return params_; }
  std::span<float> gradients() override { return grads_; }
  std::span<const float> gradients() const override { return grads_; }

 protected:
  // Registers a tensor of `size` floats initialised ~ U(−1/√fan_in, 1/√fan_in); returns its offset.
  std::size_t add_tensor(const std::string& name, std::size_t size, std::size_t fan_in, std::uint64_t seed) {
    const std::size_t index = layout_.add_layer(name, size);
    const std::size_t offset = layout_.layer(index).offset;
    params_.resize(layout_.total_size());
    grads_.assign(layout_.total_size(), 0.0f);
    Rng rng(seed, Rng::stream_id({kInitPurpose, index}));
    const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
    for (std::size_t i = 0; i < size; ++i) params_[offset + i] = (2.0f * rng.uniform_float() - 1.0f) * bound;
    return offset;
  }
  MatMap param_mat(std::size_t offset, std::size_t rows, std::size_t cols) {
    return MatMap(params_.data() + offset, static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(cols));
  }
  MatMap grad_mat(std::size_t offset, std::size_t rows, std::size_t cols) {
    return MatMap(grads_.data() + offset, static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(cols));
  }
  VecMap param_vec(std::size_t offset, std::size_t n) {
    return VecMap(params_.data() + offset, static_cast<Eigen::Index>(n));
  }
  VecMap grad_vec(std::size_t offset, std::size_t n) {
    return VecMap(grads_.data() + offset, static_cast<Eigen::Index>(n));
  }

  GradientLayout layout_;
  std::vector<float> params_;
  std::vector<float> grads_;
};

std::size_t batch_of(std::span<const float> inputs, std::size_t features) {
  BALLOT_ENFORCE_GT(features, 0u);
  BALLOT_ENFORCE_EQ(inputs.size() % features, 0u);
  return inputs.size() / features;
}

// ---- dense networks: logistic regression (no hidden layer) and the MLP -------------------------

class DenseNet final : public FlatModel {
 public:
  DenseNet(std::size_t in, std::vector<std::size_t> hidden, std::size_t classes, std::uint64_t seed, bool logreg)
      : in_(in), hidden_(std::move(hidden)), classes_(classes), logreg_(logreg) {
    std::size_t fan_in = in_;
    std::vector<std::size_t> widths = hidden_;
    widths.push_back(classes_);
    for (std::size_t l = 0; l < widths.size(); ++l) {
      const std::string name = logreg_ ? std::string("fc") : "fc" + std::to_string(l + 1);
      Layer layer{fan_in, widths[l], 0, 0};
      layer.w = add_tensor(name + ".weight", widths[l] * fan_in, fan_in, seed);
      layer.b = add_tensor(name + ".bias", widths[l], fan_in, seed);
      layers_.push_back(layer);
      fan_in = widths[l];
    }
    acts_.resize(layers_.size());
  }

  std::string spec() const override {
    if (logreg_) return "logreg";
    std::string s = "mlp:hidden=";
    for (std::size_t i = 0; i < hidden_.size(); ++i) s += (i ? "/" : "") + std::to_string(hidden_[i]);
    return s;
  }
  std::size_t num_features() const override { return in_; }
  std::size_t num_classes() const override { return classes_; }
  std::unique_ptr<Model> clone() const override { return std::make_unique<DenseNet>(*this); }

  void forward(std::span<const float> inputs, std::span<float> logits) override {
    const std::size_t batch = batch_of(inputs, in_);
    BALLOT_ENFORCE_EQ(logits.size(), batch * classes_);
    run_forward(inputs, batch);
    std::copy(acts_.back().data(), acts_.back().data() + logits.size(), logits.begin());
  }

  double forward_backward(std::span<const float> inputs, std::span<const std::uint8_t> labels) override {
    const std::size_t batch = batch_of(inputs, in_);
    BALLOT_ENFORCE_EQ(labels.size(), batch);
    run_forward(inputs, batch);
    RowMat& logits = acts_.back();
    delta_.resize(logits.rows(), logits.cols());
    const double loss = softmax_cross_entropy(std::span<const float>(logits.data(), logits.size()), labels, classes_,
                                              std::span<float>(delta_.data(), delta_.size()));
    const ConstMatMap x(inputs.data(), static_cast<Eigen::Index>(batch), static_cast<Eigen::Index>(in_));
    for (std::size_t l = layers_.size(); l-- > 0;) {
      const Layer& layer = layers_[l];
      // z_l = a_{l−1} W_lᵀ + b_l:  dW_l = δᵀ a_{l−1},  db_l = Σ_rows δ,  δ_{l−1} = (δ W_l) ⊙ [z_{l−1} > 0].
      auto dw = grad_mat(layer.w, layer.out, layer.in);
      if (l == 0) {
        dw.noalias() = delta_.transpose() * x;
      } else {
        dw.noalias() = delta_.transpose() * acts_[l - 1];
      }
      grad_vec(layer.b, layer.out) = delta_.colwise().sum();
      if (l > 0) {
        prev_delta_.resize(static_cast<Eigen::Index>(batch), static_cast<Eigen::Index>(layer.in));
        prev_delta_.noalias() = delta_ * param_mat(layer.w, layer.out, layer.in);
        // acts_[l−1] holds relu(z), which is > 0 exactly where z > 0.
        prev_delta_ = (acts_[l - 1].array() > 0.0f).select(prev_delta_, 0.0f);
        std::swap(delta_, prev_delta_);
      }
    }
    return loss;
  }

 private:
  struct Layer {
    std::size_t in, out, w, b;
  };

  void run_forward(std::span<const float> inputs, std::size_t batch) {
    const ConstMatMap x(inputs.data(), static_cast<Eigen::Index>(batch), static_cast<Eigen::Index>(in_));
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const Layer& layer = layers_[l];
      RowMat& z = acts_[l];
      z.resize(static_cast<Eigen::Index>(batch), static_cast<Eigen::Index>(layer.out));
      const auto w = param_mat(layer.w, layer.out, layer.in);
      if (l == 0) {
        z.noalias() = x * w.transpose();
      } else {
        z.noalias() = acts_[l - 1] * w.transpose();
      }
      z.rowwise() += param_vec(layer.b, layer.out);
      if (l + 1 < layers_.size()) z = z.cwiseMax(0.0f);
    }
  }

  std::size_t in_;
  std::vector<std::size_t> hidden_;
  std::size_t classes_;
  bool logreg_;
  std::vector<Layer> layers_;
  std::vector<RowMat> acts_;  // post-activation of each layer; the last one holds the logits
  RowMat delta_, prev_delta_;
};

// ---- the CNN -----------------------------------------------------------------------------------

// One convolution with "same" padding and stride 1, on batch × H × W × C_in activations.
struct ConvShape {
  std::size_t h, w, c_in, c_out, k;
  std::size_t patch() const { return c_in * k * k; }
};

// cols[(b·H + y)·W + x][(ci·k + ky)·k + kx] = in[b][y + ky − k/2][x + kx − k/2][ci] (0 outside).
void im2col(const float* in, std::size_t batch, const ConvShape& s, RowMat& cols) {
  const std::size_t patch = s.patch();
  cols.resize(static_cast<Eigen::Index>(batch * s.h * s.w), static_cast<Eigen::Index>(patch));
  const long pad = static_cast<long>(s.k / 2);
  float* out = cols.data();
  for (std::size_t b = 0; b < batch; ++b) {
    const float* image = in + b * s.h * s.w * s.c_in;
    for (std::size_t y = 0; y < s.h; ++y) {
      for (std::size_t x = 0; x < s.w; ++x, out += patch) {
        for (std::size_t ky = 0; ky < s.k; ++ky) {
          const long iy = static_cast<long>(y + ky) - pad;
          for (std::size_t kx = 0; kx < s.k; ++kx) {
            const long ix = static_cast<long>(x + kx) - pad;
            const bool inside = iy >= 0 && iy < static_cast<long>(s.h) && ix >= 0 && ix < static_cast<long>(s.w);
            const float* px =
                inside ? image + (static_cast<std::size_t>(iy) * s.w + static_cast<std::size_t>(ix)) * s.c_in : nullptr;
            for (std::size_t ci = 0; ci < s.c_in; ++ci) out[(ci * s.k + ky) * s.k + kx] = inside ? px[ci] : 0.0f;
          }
        }
      }
    }
  }
}

// The adjoint of im2col: scatter-adds each patch gradient back to the input positions.
void col2im(const RowMat& dcols, std::size_t batch, const ConvShape& s, float* din) {
  std::fill(din, din + batch * s.h * s.w * s.c_in, 0.0f);
  const std::size_t patch = s.patch();
  const long pad = static_cast<long>(s.k / 2);
  const float* row = dcols.data();
  for (std::size_t b = 0; b < batch; ++b) {
    float* image = din + b * s.h * s.w * s.c_in;
    for (std::size_t y = 0; y < s.h; ++y) {
      for (std::size_t x = 0; x < s.w; ++x, row += patch) {
        for (std::size_t ky = 0; ky < s.k; ++ky) {
          const long iy = static_cast<long>(y + ky) - pad;
          if (iy < 0 || iy >= static_cast<long>(s.h)) continue;
          for (std::size_t kx = 0; kx < s.k; ++kx) {
            const long ix = static_cast<long>(x + kx) - pad;
            if (ix < 0 || ix >= static_cast<long>(s.w)) continue;
            float* px = image + (static_cast<std::size_t>(iy) * s.w + static_cast<std::size_t>(ix)) * s.c_in;
            for (std::size_t ci = 0; ci < s.c_in; ++ci) px[ci] += row[(ci * s.k + ky) * s.k + kx];
          }
        }
      }
    }
  }
}

// 2×2 max pooling, stride 2, on batch × H × W × C; `arg` records the winning input offset.
void maxpool(const float* in, std::size_t batch, std::size_t h, std::size_t w, std::size_t c, float* out,
             std::uint32_t* arg) {
  const std::size_t ho = h / 2, wo = w / 2;
  for (std::size_t b = 0; b < batch; ++b) {
    const std::size_t base = b * h * w * c;
    for (std::size_t y = 0; y < ho; ++y) {
      for (std::size_t x = 0; x < wo; ++x) {
        for (std::size_t ch = 0; ch < c; ++ch) {
          std::size_t best = base + ((2 * y) * w + 2 * x) * c + ch;
          for (std::size_t dy = 0; dy < 2; ++dy) {
            for (std::size_t dx = 0; dx < 2; ++dx) {
              const std::size_t at = base + ((2 * y + dy) * w + 2 * x + dx) * c + ch;
              // NaN wins, as in torch's max_pool2d: a non-finite input gives a non-finite loss.
              if (in[at] > in[best] || (std::isnan(in[at]) && !std::isnan(in[best]))) best = at;
            }
          }
          const std::size_t o = ((b * ho + y) * wo + x) * c + ch;
          out[o] = in[best];
          arg[o] = static_cast<std::uint32_t>(best);
        }
      }
    }
  }
}

class Cnn final : public FlatModel {
 public:
  Cnn(const CnnOptions& o, std::uint64_t seed) : o_(o) {
    s1_ = {o.rows, o.cols, o.channels, o.conv1, o.kernel};
    s2_ = {o.rows / 2, o.cols / 2, o.conv1, o.conv2, o.kernel};
    fc_in_ = (o.rows / 4) * (o.cols / 4) * o.conv2;
    w1_ = add_tensor("conv1.weight", s1_.c_out * s1_.patch(), s1_.patch(), seed);
    b1_ = add_tensor("conv1.bias", s1_.c_out, s1_.patch(), seed);
    w2_ = add_tensor("conv2.weight", s2_.c_out * s2_.patch(), s2_.patch(), seed);
    b2_ = add_tensor("conv2.bias", s2_.c_out, s2_.patch(), seed);
    wf_ = add_tensor("fc.weight", o.num_classes * fc_in_, fc_in_, seed);
    bf_ = add_tensor("fc.bias", o.num_classes, fc_in_, seed);
  }

  std::string spec() const override {
    return "cnn:c1=" + std::to_string(o_.conv1) + ",c2=" + std::to_string(o_.conv2) + ",k=" + std::to_string(o_.kernel);
  }
  std::size_t num_features() const override { return o_.rows * o_.cols * o_.channels; }
  std::size_t num_classes() const override { return o_.num_classes; }
  std::unique_ptr<Model> clone() const override { return std::make_unique<Cnn>(*this); }

  void forward(std::span<const float> inputs, std::span<float> logits) override {
    const std::size_t batch = batch_of(inputs, num_features());
    BALLOT_ENFORCE_EQ(logits.size(), batch * o_.num_classes);
    run_forward(inputs, batch);
    std::copy(logits_.data(), logits_.data() + logits.size(), logits.begin());
  }

  double forward_backward(std::span<const float> inputs, std::span<const std::uint8_t> labels) override {
    const std::size_t batch = batch_of(inputs, num_features());
    BALLOT_ENFORCE_EQ(labels.size(), batch);
    run_forward(inputs, batch);
    const auto rows = static_cast<Eigen::Index>(batch);
    dlogits_.resize(rows, static_cast<Eigen::Index>(o_.num_classes));
    const double loss = softmax_cross_entropy(std::span<const float>(logits_.data(), logits_.size()), labels,
                                              o_.num_classes, std::span<float>(dlogits_.data(), dlogits_.size()));
    // Fully connected: dW = δᵀ P2, db = Σ δ, dP2 = δ W.
    const ConstMatMap p2(pool2_.data(), rows, static_cast<Eigen::Index>(fc_in_));
    grad_mat(wf_, o_.num_classes, fc_in_).noalias() = dlogits_.transpose() * p2;
    grad_vec(bf_, o_.num_classes) = dlogits_.colwise().sum();
    dpool_.resize(rows, static_cast<Eigen::Index>(fc_in_));
    dpool_.noalias() = dlogits_ * param_mat(wf_, o_.num_classes, fc_in_);
    // Pool 2 and ReLU 2 backward: route to the arg-max, keep where the activation was positive.
    unpool_relu(dpool_.data(), arg2_, act2_, dact_);
    conv_backward(s2_, batch, cols2_, dact_, w2_, b2_, /*want_input_grad=*/true);
    unpool_relu(dinput_.data(), arg1_, act1_, dact_);
    conv_backward(s1_, batch, cols1_, dact_, w1_, b1_, /*want_input_grad=*/false);
    return loss;
  }

 private:
  void conv_forward(const float* in, std::size_t batch, const ConvShape& s, RowMat& cols, std::size_t w, std::size_t b,
                    RowMat& act) {
    im2col(in, batch, s, cols);
    act.resize(cols.rows(), static_cast<Eigen::Index>(s.c_out));
    act.noalias() = cols * param_mat(w, s.c_out, s.patch()).transpose();
    act.rowwise() += param_vec(b, s.c_out);
    act = act.cwiseMax(0.0f);
  }

  void run_forward(std::span<const float> inputs, std::size_t batch) {
    conv_forward(inputs.data(), batch, s1_, cols1_, w1_, b1_, act1_);
    pool1_.resize(static_cast<Eigen::Index>(batch * s2_.h * s2_.w), static_cast<Eigen::Index>(s1_.c_out));
    arg1_.resize(static_cast<std::size_t>(pool1_.size()));
    maxpool(act1_.data(), batch, s1_.h, s1_.w, s1_.c_out, pool1_.data(), arg1_.data());
    conv_forward(pool1_.data(), batch, s2_, cols2_, w2_, b2_, act2_);
    pool2_.resize(static_cast<Eigen::Index>(batch), static_cast<Eigen::Index>(fc_in_));
    arg2_.resize(static_cast<std::size_t>(pool2_.size()));
    maxpool(act2_.data(), batch, s2_.h, s2_.w, s2_.c_out, pool2_.data(), arg2_.data());
    logits_.resize(static_cast<Eigen::Index>(batch), static_cast<Eigen::Index>(o_.num_classes));
    logits_.noalias() = pool2_ * param_mat(wf_, o_.num_classes, fc_in_).transpose();
    logits_.rowwise() += param_vec(bf_, o_.num_classes);
  }

  // d(act) = scatter of d(pool) to the arg-max positions, masked by act > 0 (ReLU).
  static void unpool_relu(const float* dpool, const std::vector<std::uint32_t>& arg, const RowMat& act, RowMat& dact) {
    dact.setZero(act.rows(), act.cols());
    float* d = dact.data();
    const float* a = act.data();
    for (std::size_t i = 0; i < arg.size(); ++i) {
      if (a[arg[i]] > 0.0f) d[arg[i]] += dpool[i];
    }
  }

  void conv_backward(const ConvShape& s, std::size_t batch, const RowMat& cols, const RowMat& dact, std::size_t w,
                     std::size_t b, bool want_input_grad) {
    // act = cols Wᵀ + b:  dW = dactᵀ cols,  db = Σ dact,  dcols = dact W, then col2im.
    grad_mat(w, s.c_out, s.patch()).noalias() = dact.transpose() * cols;
    grad_vec(b, s.c_out) = dact.colwise().sum();
    if (!want_input_grad) return;
    dcols_.resize(cols.rows(), cols.cols());
    dcols_.noalias() = dact * param_mat(w, s.c_out, s.patch());
    dinput_.resize(static_cast<Eigen::Index>(batch * s.h * s.w), static_cast<Eigen::Index>(s.c_in));
    col2im(dcols_, batch, s, dinput_.data());
  }

  CnnOptions o_;
  ConvShape s1_{}, s2_{};
  std::size_t fc_in_ = 0;
  std::size_t w1_ = 0, b1_ = 0, w2_ = 0, b2_ = 0, wf_ = 0, bf_ = 0;
  RowMat cols1_, act1_, pool1_, cols2_, act2_, pool2_, logits_;
  RowMat dlogits_, dpool_, dact_, dcols_, dinput_;
  std::vector<std::uint32_t> arg1_, arg2_;
};

// ---- a synthetic-gradient model for benchmarks of communication ------------------------------

// d parameters whose gradient costs one pass over them: g = x − c, c the batch's mean input.
// Its signs vary from coordinate to coordinate and its magnitudes from batch to batch, so votes
// and floats on the wire are ordinary data, while the compute of a round is ~1 ms per million
// parameters instead of the MLP's GEMMs; a benchmark then measures communication and the CPU
// work around it. Logits are all zero (it learns nothing); the loss is c², finite.
class SyntheticGradient final : public FlatModel {
 public:
  SyntheticGradient(std::size_t features, std::size_t classes, std::size_t dimension, std::uint64_t seed)
      : features_(features), classes_(classes) {
    add_tensor("x", dimension, 1, seed);
  }
  std::string spec() const override { return "synthetic:d=" + std::to_string(params_.size()); }
  std::size_t num_features() const override { return features_; }
  std::size_t num_classes() const override { return classes_; }

  double forward_backward(std::span<const float> inputs, std::span<const std::uint8_t> labels) override {
    const std::size_t batch = batch_of(inputs, features_);
    BALLOT_ENFORCE_EQ(labels.size(), batch);
    double sum = 0.0;
    for (float v : inputs) sum += v;
    const float c = inputs.empty() ? 0.0f : static_cast<float>(sum / static_cast<double>(inputs.size()));
    for (std::size_t i = 0; i < params_.size(); ++i) grads_[i] = params_[i] - c;
    return static_cast<double>(c) * c;
  }
  void forward(std::span<const float> inputs, std::span<float> logits) override {
    BALLOT_ENFORCE_EQ(logits.size(), batch_of(inputs, features_) * classes_);
    std::fill(logits.begin(), logits.end(), 0.0f);
  }
  std::unique_ptr<Model> clone() const override { return std::make_unique<SyntheticGradient>(*this); }

 private:
  std::size_t features_;
  std::size_t classes_;
};

Status check_classes(std::size_t classes) {
  if (classes < 2 || classes > 256) {
    return make_error(ErrorCode::kInvalidArgument, "a classifier needs 2..256 classes, got " + std::to_string(classes));
  }
  return {};
}

// The parameters of a weight matrix of rows × cols and its bias of rows, counted in double (whose
// rounding above 2^53 cannot move a count across 2^31).
double dense_parameters(double rows, double cols) { return rows * cols + rows; }

// A model's parameter count must not exceed kMaxModelParameters: checked before anything is
// allocated.
Status check_parameter_count(double count, const std::string& model) {
  if (count > static_cast<double>(kMaxModelParameters)) {
    char about[32];
    std::snprintf(about, sizeof(about), "%.3g", count);
    return make_error(ErrorCode::kInvalidArgument,
                      model + " would have about " + about + " parameters; at most 2^31 are supported");
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<Model>> make_logistic_regression(const LogisticRegressionOptions& options, std::uint64_t seed) {
  BALLOT_TRY(check_classes(options.num_classes));
  if (options.num_features == 0) return make_error(ErrorCode::kInvalidArgument, "logreg needs num_features > 0");
  BALLOT_TRY(check_parameter_count(
      dense_parameters(static_cast<double>(options.num_classes), static_cast<double>(options.num_features)), "logreg"));
  return std::unique_ptr<Model>(
      std::make_unique<DenseNet>(options.num_features, std::vector<std::size_t>{}, options.num_classes, seed, true));
}

Result<std::unique_ptr<Model>> make_mlp(const MlpOptions& options, std::uint64_t seed) {
  BALLOT_TRY(check_classes(options.num_classes));
  if (options.num_features == 0 || options.hidden.empty() ||
      std::any_of(options.hidden.begin(), options.hidden.end(), [](std::size_t h) { return h == 0; })) {
    return make_error(ErrorCode::kInvalidArgument,
                      "mlp needs num_features > 0 and at least one non-empty hidden layer");
  }
  double count = 0.0, in = static_cast<double>(options.num_features);
  for (const std::size_t h : options.hidden) {
    count += dense_parameters(static_cast<double>(h), in);
    in = static_cast<double>(h);
  }
  BALLOT_TRY(check_parameter_count(count + dense_parameters(static_cast<double>(options.num_classes), in), "mlp"));
  return std::unique_ptr<Model>(
      std::make_unique<DenseNet>(options.num_features, options.hidden, options.num_classes, seed, false));
}

Result<std::unique_ptr<Model>> make_cnn(const CnnOptions& options, std::uint64_t seed) {
  BALLOT_TRY(check_classes(options.num_classes));
  if (options.rows < 4 || options.cols < 4 || options.channels == 0 || options.conv1 == 0 || options.conv2 == 0 ||
      options.kernel == 0 || options.kernel % 2 == 0 || options.rows > 4096 || options.cols > 4096) {
    return make_error(ErrorCode::kInvalidArgument,
                      "cnn needs an image of at least 4x4, channels > 0, conv sizes > 0 and an odd kernel");
  }
  const double k2 = static_cast<double>(options.kernel) * static_cast<double>(options.kernel);
  const double c1 = static_cast<double>(options.conv1), c2 = static_cast<double>(options.conv2);
  const double fc_in = static_cast<double>(options.rows / 4) * static_cast<double>(options.cols / 4) * c2;
  BALLOT_TRY(check_parameter_count(dense_parameters(c1, static_cast<double>(options.channels) * k2) +
                                       dense_parameters(c2, c1 * k2) +
                                       dense_parameters(static_cast<double>(options.num_classes), fc_in),
                                   "cnn"));
  return std::unique_ptr<Model>(std::make_unique<Cnn>(options, seed));
}

ModelShape shape_of(const Dataset& data) {
  return ModelShape{data.num_features, data.num_classes, data.rows, data.cols, data.channels};
}

Result<std::unique_ptr<Model>> make_model(std::string_view text, const ModelShape& shape, std::uint64_t seed) {
  BALLOT_ASSIGN_OR_RETURN(auto spec, Spec::parse(text));
  if (spec.name() == "logreg") {
    BALLOT_TRY(spec.check_known({}));
    return make_logistic_regression({shape.num_features, shape.num_classes}, seed);
  }
  if (spec.name() == "mlp") {
    BALLOT_TRY(spec.check_known({"hidden"}));
    MlpOptions options{shape.num_features, {}, shape.num_classes};
    const std::string hidden = spec.get_string("hidden", "128");
    std::size_t at = 0;
    while (at <= hidden.size()) {
      const std::size_t end = std::min(hidden.find('/', at), hidden.size());
      const std::string part = hidden.substr(at, end - at);
      std::size_t value = 0;
      bool ok = !part.empty() && part.size() <= 9;
      for (char ch : part) ok = ok && ch >= '0' && ch <= '9';
      if (ok) value = std::stoul(part);
      if (!ok || value == 0) {
        return make_error(ErrorCode::kInvalidArgument, "model spec '" + std::string(text) +
                                                           "': hidden sizes must be positive integers joined by '/'");
      }
      options.hidden.push_back(value);
      at = end + 1;
    }
    return make_mlp(options, seed);
  }
  if (spec.name() == "cnn") {
    BALLOT_TRY(spec.check_known({"c1", "c2", "k"}));
    if (shape.rows == 0 || shape.rows * shape.cols * shape.channels != shape.num_features) {
      return make_error(ErrorCode::kInvalidArgument, "model 'cnn' needs image inputs (rows × cols × channels)");
    }
    BALLOT_ASSIGN_OR_RETURN(const auto c1, spec.get_int("c1", 8));
    BALLOT_ASSIGN_OR_RETURN(const auto c2, spec.get_int("c2", 16));
    BALLOT_ASSIGN_OR_RETURN(const auto k, spec.get_int("k", 5));
    if (c1 <= 0 || c2 <= 0 || k <= 0 || c1 > 4096 || c2 > 4096 || k > 31) {
      return make_error(ErrorCode::kInvalidArgument,
                        "model spec '" + std::string(text) + "': c1, c2 in 1..4096, k in 1..31");
    }
    CnnOptions options{shape.rows,
                       shape.cols,
                       shape.channels,
                       static_cast<std::size_t>(c1),
                       static_cast<std::size_t>(c2),
                       static_cast<std::size_t>(k),
                       shape.num_classes};
    return make_cnn(options, seed);
  }
  if (spec.name() == "synthetic") {
    BALLOT_TRY(spec.check_known({"d"}));
    BALLOT_ASSIGN_OR_RETURN(const auto d, spec.get_int("d", 1'000'000));
    if (d <= 0 || d > (std::int64_t{1} << 30)) {
      return make_error(ErrorCode::kInvalidArgument, "model spec '" + std::string(text) + "': d in 1..2^30");
    }
    BALLOT_TRY(check_classes(shape.num_classes));
    if (shape.num_features == 0) return make_error(ErrorCode::kInvalidArgument, "model 'synthetic' needs inputs");
    return std::unique_ptr<Model>(
        std::make_unique<SyntheticGradient>(shape.num_features, shape.num_classes, static_cast<std::size_t>(d), seed));
  }
  if (spec.name() == "init") {
    // The shape and seed do not apply: the file holds the architecture's tensors and their values.
    BALLOT_TRY(spec.check_known({"file"}));
    const std::string path = spec.get_string("file", "");
    if (path.empty()) {
      return make_error(ErrorCode::kInvalidArgument, "model spec '" + std::string(text) + "': needs file=PATH");
    }
    auto model = make_parameter_model(path);
    if (!model.ok()) {
      auto error = std::move(model).error();
      error.message = "model spec '" + std::string(text) + "': " + error.message;
      return error;
    }
    return model;
  }
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown model '" + spec.name() + "' (known: logreg, mlp, cnn, synthetic, init)");
}

}  // namespace ballot::learning

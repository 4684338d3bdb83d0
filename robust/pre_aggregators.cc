#include "robust/pre_aggregators.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/rng.h"
#include "robust/detail/common.h"

namespace ballot::robust {

// ---- NNM ----------------------------------------------------------------------------------------

Status NearestNeighborMixing::check(std::size_t n, std::size_t f) {
  if (n == 0) return make_error(ErrorCode::kPrecondition, "nnm needs at least one input");
  if (!detail::at_least(n, 2, f, 1)) return detail::precondition_error("nnm", "n >= 2f + 1", n, f);
  return {};
}

std::string NearestNeighborMixing::spec() const {
  return detail::with_threads("nnm:f=" + std::to_string(options_.f), options_.threads);
}

Result<PreAggregation> NearestNeighborMixing::apply(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  const std::size_t n = inputs.n(), d = inputs.d();
  const detail::Distances dist = detail::pairwise_distances(inputs, options_.threads);
  std::vector<std::size_t> usable;
  for (std::size_t i = 0; i < n; ++i)
    if (dist.usable[i]) usable.push_back(i);
  const std::size_t u = usable.size();
  const std::size_t k = std::min(u, n - options_.f);  // neighbours per input, itself included

  // Mixing matrix over the usable inputs: row a has 1/k on a's k nearest (Allouah et al., Alg. 1).
  std::vector<float> mixing(u * u, 0.0f);
  std::vector<std::size_t> order(u);
  for (std::size_t a = 0; a < u; ++a) {
    std::iota(order.begin(), order.end(), 0);
    // Itself first (whatever ties at distance 0), then by distance, ties to the lower index.
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      if (x == a || y == a) return x == a && y != a;
      return dist.at(usable[a], usable[x]) < dist.at(usable[a], usable[y]);
    });
    for (std::size_t r = 0; r < k; ++r) mixing[a * u + order[r]] = 1.0f / static_cast<float>(k);
  }

  PreAggregation out;
  out.non_finite = dist.non_finite;
  out.output.n = n;
  out.output.d = d;
  out.output.values.resize(n * d);
  for (std::size_t i = 0; i < n; ++i)  // unusable inputs pass through for the rule to exclude
    if (!dist.usable[i]) std::memcpy(out.output.values.data() + i * d, inputs.row(i), d * sizeof(float));
  if (u == 0) return out;

  // One mixing product per column block (L2-sized). With few rows the product is a handful of
  // axpys per output row, reading the input rows in place (Eigen's kernel would be mostly padding,
  // as for the Gram matrix); their blocks stay in L2 for the next output row. Above 32 rows Eigen
  // multiplies the rows in place when they are equally spaced and all usable, and writes straight
  // into the output (it packs its operands itself, so gathering the rows into a block first and
  // scattering the result after were two extra copies of every value).
  const auto& kern = detail::isa_kernels();
  constexpr std::size_t kBlock = 1024;
  const std::size_t blocks = (d + kBlock - 1) / kBlock;
  const std::size_t stride = inputs.uniform_stride();
  const bool in_place = u == n && stride != 0;
  detail::parallel_for(blocks, options_.threads, [&](std::size_t b0, std::size_t b1) {
    std::vector<float> in(u <= 32 || in_place ? 0 : u * kBlock), mixed(u <= 32 || in_place ? 0 : u * kBlock);
    for (std::size_t b = b0; b < b1; ++b) {
      const std::size_t begin = b * kBlock, width = std::min(kBlock, d - begin);
      if (u <= 32) {
        for (std::size_t a = 0; a < u; ++a) {
          float* dst = out.output.values.data() + usable[a] * d + begin;
          std::fill(dst, dst + width, 0.0f);
          for (std::size_t c = 0; c < u; ++c)
            if (mixing[a * u + c] != 0.0f) kern.axpy(mixing[a * u + c], inputs.row(usable[c]) + begin, dst, width);
        }
        continue;
      }
      if (in_place) {
        kern.mix(mixing.data(), u, inputs.row(0) + begin, u, width, stride, out.output.values.data() + begin, d);
        continue;
      }
      for (std::size_t a = 0; a < u; ++a)
        std::memcpy(in.data() + a * width, inputs.row(usable[a]) + begin, width * sizeof(float));
      kern.mix(mixing.data(), u, in.data(), u, width, width, mixed.data(), width);
      for (std::size_t a = 0; a < u; ++a)
        std::memcpy(out.output.values.data() + usable[a] * d + begin, mixed.data() + a * width, width * sizeof(float));
    }
  });
  return out;
}

// ---- Bucketing ----------------------------------------------------------------------------------

std::string Bucketing::spec() const {
  return detail::with_threads("bucketing:s=" + std::to_string(options_.s) + ",seed=" + std::to_string(options_.seed) +
                                  (options_.shuffle ? "" : ",shuffle=0"),
                              options_.threads);
}

Status Bucketing::check(std::size_t n) const {
  if (options_.s == 0) return make_error(ErrorCode::kInvalidArgument, "bucketing: s must be >= 1");
  if (n == 0) return make_error(ErrorCode::kPrecondition, "bucketing needs at least one input");
  return {};
}

Result<PreAggregation> Bucketing::apply(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  const std::size_t n = inputs.n(), d = inputs.d(), s = options_.s;
  std::vector<std::size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  Rng rng(options_.seed, calls_++);
  if (options_.shuffle) rng.shuffle(std::span<std::size_t>(perm));
  const std::size_t buckets = n / s + (n % s != 0 ? 1 : 0);

  PreAggregation out;
  out.output.n = buckets;
  out.output.d = d;
  out.output.values.resize(buckets * d);
  if (d == 0) return out;
  // Column blocks of every bucket, bucket-major: each block of the output is the scaled sum of
  // its bucket's rows, added in registers and written once (a whole-row axpy would read and write
  // back a d-float output per input), and with buckets × blocks units every thread has work even
  // when there are fewer buckets than threads. Each value is computed by the same operations as a
  // whole-row pass (scale, then add each scaled row in order). A large output streams.
  const auto& kern = detail::isa_kernels();
  constexpr std::size_t kBlock = 2048;
  const std::size_t blocks = (d + kBlock - 1) / kBlock;
  const bool stream = buckets * d * sizeof(float) >= detail::kStreamOutputBytes;
  std::vector<std::uint8_t> finite(buckets * blocks, 1);
  detail::parallel_for(buckets * blocks, options_.threads, [&](std::size_t u0, std::size_t u1) {
    std::vector<const float*> pieces(s);
    for (std::size_t u = u0; u < u1; ++u) {
      const std::size_t b = u / blocks, begin = (u % blocks) * kBlock, width = std::min(kBlock, d - begin);
      const std::size_t first = b * s, last = std::min(n, first + s);
      const float scale = 1.0f / static_cast<float>(last - first);
      for (std::size_t k = first; k < last; ++k) pieces[k - first] = inputs.row(perm[k]) + begin;
      float* dst = out.output.values.data() + b * d + begin;
      finite[u] = kern.scaled_sum_rows(pieces.data(), last - first, scale, width, dst, stream) ? 1 : 0;
    }
  });
  // A non-finite input makes its bucket non-finite; name the inputs behind such buckets.
  for (std::size_t b = 0; b < buckets; ++b) {
    if (std::all_of(finite.begin() + static_cast<std::ptrdiff_t>(b * blocks),
                    finite.begin() + static_cast<std::ptrdiff_t>((b + 1) * blocks),
                    [](std::uint8_t f) { return f != 0; }))
      continue;
    for (std::size_t k = b * s; k < std::min(n, b * s + s); ++k)
      if (!kern.all_finite(inputs.row(perm[k]), d)) out.non_finite.push_back(perm[k]);
  }
  std::sort(out.non_finite.begin(), out.non_finite.end());
  return out;
}

// ---- Norm clipping ------------------------------------------------------------------------------

std::string NormClipping::spec() const {
  return detail::with_threads("clipping:tau=" + format_number(options_.tau), options_.threads);
}

Status NormClipping::check(std::size_t n) const {
  if (!(options_.tau > 0) || !std::isfinite(options_.tau))
    return make_error(ErrorCode::kInvalidArgument, "clipping: tau must be finite and > 0");
  if (n == 0) return make_error(ErrorCode::kPrecondition, "clipping needs at least one input");
  return {};
}

Result<PreAggregation> NormClipping::apply(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  PreAggregation out;
  out.output.n = inputs.n();
  out.output.d = inputs.d();
  out.output.values.resize(inputs.n() * inputs.d());
  out.non_finite = clip(inputs, &out.output).non_finite;
  return out;
}

Result<std::optional<RowScales>> NormClipping::row_scales(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  return std::optional<RowScales>(clip(inputs, nullptr));
}

RowScales NormClipping::clip(const InputMatrix& inputs, Matrix* output) const {
  const std::size_t n = inputs.n(), d = inputs.d();
  const auto& kern = detail::isa_kernels();
  std::vector<std::uint8_t> bad(n, 0);
  RowScales out;
  out.scales.assign(n, 1.0f);
  std::vector<float>& scales = out.scales;
  // The kernels sum squares in float lanes, which overflow for finite rows near the float range
  // (coordinates of about 1.8e19 and more): those (rare) are summed again in double, which cannot
  // overflow, so that they are clipped to norm tau like any other row (as ARC does), not to zero.
  auto settle = [&](std::size_t i, double squared_norm) {
    if (!std::isfinite(squared_norm)) {
      const float* x = inputs.row(i);
      if (!kern.all_finite(x, d)) {
        bad[i] = 1;
        return;
      }
      squared_norm = 0;
      for (std::size_t j = 0; j < d; ++j) squared_norm += static_cast<double>(x[j]) * x[j];
    }
    const double norm = std::sqrt(squared_norm);
    scales[i] = static_cast<float>(norm > options_.tau ? options_.tau / norm : 1.0);
  };
  // Columns [begin, end) of row i into the output, with streaming stores when it is large
  // (detail::kStreamOutputBytes): the output is not read in before it is written (nor does it push
  // the input out of the caches). Measured at d = 1e6, CPU time of the same binary in alternate
  // runs: n = 10 8.8 -> 5.6-6.0 ms, n = 25 23 -> 17-18 ms, n = 100 91-96 -> 69-74 ms. Writing each
  // row backwards (re-reading first what the norm read last, still in L2) measured the same within
  // the noise.
  const auto write = detail::scale_copy_for(kern, n * d * sizeof(float));
  auto write_row = [&](std::size_t i, std::size_t begin, std::size_t end) {
    if (output == nullptr) return;
    float* dst = output->values.data() + i * d;
    if (bad[i]) {
      std::memcpy(dst + begin, inputs.row(i) + begin, (end - begin) * sizeof(float));
      return;
    }
    write(scales[i], inputs.row(i) + begin, dst + begin, end - begin);
  };
  const std::size_t threads = std::max<std::size_t>(1, options_.threads);
  const std::size_t pieces = (d + detail::kNormBlock - 1) / detail::kNormBlock;
  if (threads <= n || pieces <= 1) {
    // Whole rows per thread.
    detail::parallel_for(n, threads, [&](std::size_t i0, std::size_t i1) {
      for (std::size_t i = i0; i < i1; ++i) {
        settle(i, kern.squared_norm(inputs.row(i), d));
        write_row(i, 0, d);
      }
    });
  } else {
    // Fewer rows than threads: each row is cut into `segments` runs of whole kNormBlock pieces;
    // the pieces' squared norms are summed in order, which is squared_norm of the row, bit for bit.
    const std::size_t segments = std::min(pieces, (threads + n - 1) / n);
    const std::size_t per_segment = (pieces + segments - 1) / segments;
    auto segment_range = [&](std::size_t segment) {
      const std::size_t begin = std::min(d, segment * per_segment * detail::kNormBlock);
      return std::pair{begin, std::min(d, begin + per_segment * detail::kNormBlock)};
    };
    std::vector<double> piece_norms(n * pieces, 0.0);
    detail::parallel_for(n * segments, threads, [&](std::size_t u0, std::size_t u1) {
      for (std::size_t u = u0; u < u1; ++u) {
        const std::size_t i = u / segments;
        const auto [begin, end] = segment_range(u % segments);
        for (std::size_t p = begin; p < end; p += detail::kNormBlock)
          piece_norms[i * pieces + p / detail::kNormBlock] =
              kern.squared_norm(inputs.row(i) + p, std::min(detail::kNormBlock, end - p));
      }
    });
    for (std::size_t i = 0; i < n; ++i) {
      double squared = 0;
      for (std::size_t p = 0; p < pieces; ++p) squared += piece_norms[i * pieces + p];
      settle(i, squared);
    }
    if (output != nullptr) {
      detail::parallel_for(n * segments, threads, [&](std::size_t u0, std::size_t u1) {
        for (std::size_t u = u0; u < u1; ++u) {
          const auto [begin, end] = segment_range(u % segments);
          if (begin < end) write_row(u / segments, begin, end);
        }
      });
    }
  }
  for (std::size_t i = 0; i < n; ++i)
    if (bad[i]) out.non_finite.push_back(i);
  return out;
}

}  // namespace ballot::robust

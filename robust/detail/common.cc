#include "robust/detail/common.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <numeric>
#include <thread>

#include "core/enforce.h"

namespace ballot::robust::detail {

void parallel_for(std::size_t count, std::size_t threads, const std::function<void(std::size_t, std::size_t)>& fn) {
  if (count == 0) return;
  threads = std::max<std::size_t>(1, std::min(threads, count));
  const std::size_t chunk = (count + threads - 1) / threads;
  const std::size_t chunks = (count + chunk - 1) / chunk;
  // Chunk t is [t·chunk, (t+1)·chunk). An exception in any chunk is rethrown here once every thread
  // has joined; a thread that cannot start (a limit on threads or memory) leaves its chunk, and the
  // chunks after it, to this thread.
  std::vector<std::exception_ptr> errors(chunks);
  const auto run = [&](std::size_t t) {
    try {
      fn(t * chunk, std::min(count, (t + 1) * chunk));
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  workers.reserve(chunks);
  std::size_t started = 1;
  for (; started < chunks; ++started) {
    try {
      workers.emplace_back(run, started);
    } catch (...) {
      break;
    }
  }
  run(0);
  for (std::size_t t = started; t < chunks; ++t) run(t);
  for (auto& worker : workers) worker.join();
  for (const auto& error : errors)
    if (error) std::rethrow_exception(error);
}

std::vector<std::size_t> non_finite_rows(const InputMatrix& inputs, std::size_t threads) {
  std::vector<std::uint8_t> bad(inputs.n(), 0);
  const auto& k = isa_kernels();
  parallel_for(inputs.n(), threads, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) bad[i] = !k.all_finite(inputs.row(i), inputs.d());
  });
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < bad.size(); ++i)
    if (bad[i]) out.push_back(i);
  return out;
}

std::vector<std::size_t> complement(std::size_t n, const std::vector<std::size_t>& excluded) {
  std::vector<std::size_t> out;
  out.reserve(n - std::min(n, excluded.size()));
  std::size_t next = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (next < excluded.size() && excluded[next] == i) {
      ++next;
      continue;
    }
    out.push_back(i);
  }
  return out;
}

namespace {

// Columns per Gram sub-product: a block of every row stays in the last-level cache.
constexpr std::size_t kGramBlock = 4096;
// At most this many partial Gram matrices are summed (in order) so that the result does not
// depend on the number of threads.
constexpr std::size_t kMaxGramUnits = 64;

}  // namespace

Distances pairwise_distances(const InputMatrix& inputs, std::size_t threads) {
  const std::size_t n = inputs.n(), d = inputs.d();
  const auto& k = isa_kernels();
  Distances out;
  out.n = n;
  out.gram.assign(n * n, 0.0);
  const std::size_t blocks = (d + kGramBlock - 1) / kGramBlock;
  const std::size_t units = std::min(blocks, kMaxGramUnits);
  const std::size_t blocks_per_unit = units == 0 ? 0 : (blocks + units - 1) / units;
  std::vector<double> partial(units * n * n, 0.0);
  const std::size_t stride = inputs.uniform_stride();
  parallel_for(units, threads, [&](std::size_t unit_begin, std::size_t unit_end) {
    std::vector<float> block(stride == 0 ? n * kGramBlock : 0);
    std::vector<float> g(n * n);
    for (std::size_t u = unit_begin; u < unit_end; ++u) {
      double* acc = partial.data() + u * n * n;
      for (std::size_t b = u * blocks_per_unit; b < std::min(blocks, (u + 1) * blocks_per_unit); ++b) {
        const std::size_t begin = b * kGramBlock, width = std::min(kGramBlock, d - begin);
        if (stride != 0) {
          k.gram(inputs.row(0) + begin, n, width, stride, g.data());
        } else {
          for (std::size_t i = 0; i < n; ++i)
            std::memcpy(block.data() + i * width, inputs.row(i) + begin, width * sizeof(float));
          k.gram(block.data(), n, width, width, g.data());
        }
        // Lower triangle (column-major): entry (i, j), i >= j, is g[j·n + i].
        for (std::size_t j = 0; j < n; ++j)
          for (std::size_t i = j; i < n; ++i) acc[i * n + j] += g[j * n + i];
      }
    }
  });
  for (std::size_t u = 0; u < units; ++u)
    for (std::size_t e = 0; e < n * n; ++e) out.gram[e] += partial[u * n * n + e];
  return distances_from_gram(std::move(out.gram), n, [&](std::size_t i) { return !k.all_finite(inputs.row(i), d); });
}

Distances distances_from_gram(std::vector<double> gram, std::size_t n,
                              const std::function<bool(std::size_t)>& has_non_finite) {
  BALLOT_ENFORCE_EQ(gram.size(), n * n);
  Distances out;
  out.n = n;
  out.gram = std::move(gram);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < i; ++j) out.gram[j * n + i] = out.gram[i * n + j];

  out.usable.assign(n, 1);
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isfinite(out.gram[i * n + i])) continue;
    out.usable[i] = 0;
    if (has_non_finite(i)) out.non_finite.push_back(i);
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  out.squared.assign(n * n, kInf);
  for (std::size_t i = 0; i < n; ++i) {
    if (!out.usable[i]) continue;
    out.squared[i * n + i] = 0;
    for (std::size_t j = 0; j < i; ++j) {
      if (!out.usable[j]) continue;
      // Rounding can make the difference slightly negative for near-identical rows.
      double s = out.gram[i * n + i] + out.gram[j * n + j] - 2 * out.gram[i * n + j];
      s = std::isfinite(s) ? std::max(0.0, s) : kInf;
      out.squared[i * n + j] = out.squared[j * n + i] = s;
    }
  }
  return out;
}

std::vector<double> krum_scores(const Distances& distances, const std::vector<std::size_t>& candidates, std::size_t f) {
  const std::size_t c = candidates.size();
  const std::size_t neighbours = c > f + 2 ? c - f - 2 : 0;
  std::vector<double> scores(c);
  std::vector<double> row;
  for (std::size_t a = 0; a < c; ++a) {
    row.clear();
    for (std::size_t b = 0; b < c; ++b)
      if (b != a) row.push_back(distances.at(candidates[a], candidates[b]));
    if (!distances.usable[candidates[a]]) {
      scores[a] = std::numeric_limits<double>::infinity();
      continue;
    }
    std::nth_element(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(neighbours), row.end());
    // Summed in ascending order so that the score does not depend on the input order.
    std::sort(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(neighbours));
    double score = 0;
    for (std::size_t k = 0; k < neighbours; ++k) score += row[k];
    scores[a] = score;
  }
  return scores;
}

std::size_t argmin_finite(const std::vector<double>& scores) {
  std::size_t best = static_cast<std::size_t>(-1);
  for (std::size_t i = 0; i < scores.size(); ++i)
    if (std::isfinite(scores[i]) && (best == static_cast<std::size_t>(-1) || scores[i] < scores[best])) best = i;
  return best;
}

Result<AggregationReport> krum_selection(Distances distances, std::size_t f, std::size_t m, const std::string& rule) {
  const std::size_t n = distances.n;
  std::vector<std::size_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  std::vector<double> scores = krum_scores(distances, all, f);
  std::vector<std::size_t> order = all;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return scores[a] < scores[b];  // +∞ sorts last; NaN never occurs (scores are sums of ≥ 0)
  });
  std::size_t finite = 0;
  for (double s : scores) finite += std::isfinite(s) ? 1 : 0;
  if (finite < m) {
    return make_error(ErrorCode::kPrecondition, rule + ": " + std::to_string(m) +
                                                    " inputs with a finite score needed, " + std::to_string(finite) +
                                                    " found (too many non-finite or overflowing inputs)");
  }
  AggregationReport report;
  report.selected.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(m));
  std::sort(report.selected.begin(), report.selected.end());
  report.excluded = complement(n, report.selected);
  report.non_finite = std::move(distances.non_finite);
  report.scores = std::move(scores);
  return report;
}

std::vector<float> weighted_sum(const InputMatrix& inputs, const std::vector<double>& coeffs, std::size_t threads) {
  BALLOT_ENFORCE_EQ(coeffs.size(), inputs.n());
  const std::size_t d = inputs.d();
  std::vector<float> out(d, 0.0f);
  const auto& k = isa_kernels();
  // The accumulator block stays in L1; the rows' blocks (n × 2 KiB) and the next ones, prefetched
  // meanwhile, stay in L2. Measured at n = 100, d = 1e6: 38 ms with 4096 columns, 31 ms with
  // 1024, 28.5 ms with 512 (the results do not depend on it: each coordinate sums in row order).
  constexpr std::size_t kBlock = 512;
  const std::size_t blocks = (d + kBlock - 1) / kBlock;
  parallel_for(blocks, threads, [&](std::size_t b0, std::size_t b1) {
    for (std::size_t b = b0; b < b1; ++b) {
      const std::size_t begin = b * kBlock, width = std::min(kBlock, d - begin);
      const std::size_t ahead = b + 1 < b1 ? std::min(kBlock, d - begin - width) : 0;
      for (std::size_t i = 0; i < inputs.n(); ++i)
        if (coeffs[i] != 0.0)
          k.axpy_ahead(static_cast<float>(coeffs[i]), inputs.row(i) + begin, out.data() + begin, width,
                       inputs.row(i) + begin + width, ahead);
    }
  });
  return out;
}

namespace {

// Batcher's odd–even merge sort (iterative form) on m wires, restricted to the comparators that
// the output ranks [need_lo, need_hi) depend on. `rounds_below_16` receives, for each kept
// comparator, whether it belongs to the first four rounds (p < 16: inside an aligned group of 16).
std::vector<Comparator> pruned_network(std::size_t m, std::size_t need_lo, std::size_t need_hi,
                                       std::vector<std::uint8_t>* rounds_below_16) {
  std::vector<Comparator> all;
  std::size_t early = 0;  // comparators of the rounds p < 16
  std::size_t wires = 1;
  while (wires < m) wires *= 2;
  // Comparators touching a wire >= m only meet padding (+∞, always on the higher wires), where
  // they are no-ops, so they are dropped.
  for (std::size_t p = 1; p < wires; p *= 2) {
    for (std::size_t k = p; k >= 1; k /= 2) {
      for (std::size_t j = k % p; j + k < wires; j += 2 * k) {
        for (std::size_t i = 0; i < k && i + j + k < wires; ++i) {
          if ((i + j) / (2 * p) == (i + j + k) / (2 * p) && i + j + k < m)
            all.push_back({static_cast<std::uint32_t>(i + j), static_cast<std::uint32_t>(i + j + k)});
        }
      }
    }
    if (p < 16) early = all.size();
  }
  // Dead-comparator elimination: keep a comparator only if an output rank we need depends on it.
  std::vector<std::uint8_t> needed(m, 0);
  for (std::size_t r = need_lo; r < need_hi && r < m; ++r) needed[r] = 1;
  std::vector<Comparator> kept;
  std::vector<std::uint8_t> kept_early;
  for (std::size_t c = all.size(); c-- > 0;) {
    if (!needed[all[c].lo] && !needed[all[c].hi]) continue;
    needed[all[c].lo] = needed[all[c].hi] = 1;
    kept.push_back(all[c]);
    kept_early.push_back(c < early ? 1 : 0);
  }
  std::reverse(kept.begin(), kept.end());
  std::reverse(kept_early.begin(), kept_early.end());
  if (rounds_below_16 != nullptr) *rounds_below_16 = std::move(kept_early);
  return kept;
}

}  // namespace

std::vector<Comparator> selection_network(std::size_t m, std::size_t need_lo, std::size_t need_hi) {
  return pruned_network(m, need_lo, need_hi, nullptr);
}

SelectionPlan selection_plan(std::size_t m, std::size_t need_lo, std::size_t need_hi) {
  std::vector<std::uint8_t> early;
  const std::vector<Comparator> network = pruned_network(m, need_lo, need_hi, &early);
  SelectionPlan plan;
  plan.sorted_wires = m;
  // The first four rounds only compare wires of the same aligned group of 16. They are replaced by
  // the whole 16-wire sort of each group, a superset of the kept ones: the extra comparators are
  // dead (they only change wires that no needed rank depends on), so the needed ranks are the
  // same values, bit for bit. On the last group, cut at m, the sort runs with +∞ padding, where
  // the comparators that meet it are the no-ops the network dropped. Groups are independent, so
  // sorting them all first is a valid order.
  for (std::size_t c = 0; c < network.size(); ++c)
    if (!early[c]) plan.comparators.push_back(network[c]);
  return plan;
}

WindowRanks window_ranks(std::size_t m, std::size_t w) {
  BALLOT_ENFORCE(w >= 1 && w <= m);
  // A window that starts below lo_mid + 1 − w lies wholly below the lower middle value, and
  // shifting it up never increases its cost (its farthest member is its lowest); it can only tie,
  // when x[first − 1] == x[first]. Symmetrically, starts above the upper middle rank never beat a
  // lower start. So the best window starts in [first, last] unless that tie occurs.
  const std::size_t lo_mid = (m - 1) / 2, hi_mid = m / 2;
  WindowRanks r;
  r.first = lo_mid + 1 >= w ? lo_mid + 1 - w : 0;
  r.last = std::min(m - w, hi_mid);
  r.need_lo = r.first > 0 ? r.first - 1 : 0;
  r.need_hi = r.last + w;
  BALLOT_ENFORCE(r.last <= r.first + w);  // the kernel's vector path relies on it
  return r;
}

namespace {

std::size_t block_columns(std::size_t rows) {
  // ~128 KiB of block per thread (plus the next block, prefetched while this one is copied), a
  // multiple of the tile width, at least one tile. Measured at n = 100, d = 1e6 (same binary,
  // interleaved runs): median 71–74 ms with 128 KiB blocks, 115–134 ms with 512 KiB; 64 KiB was
  // on par with 128 KiB, 32 KiB slower.
  const std::size_t columns = (std::size_t{1} << 15) / std::max<std::size_t>(rows, 1);
  return std::clamp<std::size_t>(columns / kTile * kTile, kTile, 2048);
}

// One column of a tile by selection (the path for more than kNetworkMaxRows rows).
float reduce_column(std::vector<float>& v, const CoordinatePlan& plan) {
  const std::size_t m = v.size();
  auto mean_of = [](auto first, auto last) {
    double sum = 0;
    for (auto it = first; it != last; ++it) sum += *it;
    return static_cast<float>(sum / static_cast<double>(last - first));
  };
  auto median_of = [&]() {
    const std::size_t upper = m / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(upper), v.end());
    const double high = v[upper];
    if (m % 2 == 1) return high;
    const double low = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(upper));
    return 0.5 * (low + high);
  };
  switch (plan.op) {
    case CoordinateOp::kMean:
      return mean_of(v.begin(), v.end());
    case CoordinateOp::kMedian:
      return static_cast<float>(median_of());
    case CoordinateOp::kTrimmedMean: {
      const auto lo = v.begin() + static_cast<std::ptrdiff_t>(plan.trim);
      const auto hi = v.end() - static_cast<std::ptrdiff_t>(plan.trim);
      std::nth_element(v.begin(), lo, v.end());
      if (hi != v.end()) std::nth_element(lo, hi, v.end());
      return mean_of(lo, hi);
    }
    case CoordinateOp::kClosestWindow: {
      const double median = median_of();
      const auto w = static_cast<std::ptrdiff_t>(plan.window);
      std::nth_element(v.begin(), v.begin() + w - 1, v.end(), [median](float a, float b) {
        const double da = std::abs(a - median), db = std::abs(b - median);
        return da < db || (da == db && a < b);
      });
      return mean_of(v.begin(), v.begin() + w);
    }
  }
  return 0;
}

}  // namespace

Result<CoordinateOutcome> coordinate_wise(
    const InputMatrix& inputs, std::size_t threads,
    const std::function<Result<CoordinatePlan>(std::size_t m, std::size_t k)>& plan_for,
    std::span<const float> row_weights) {
  const std::size_t n = inputs.n(), d = inputs.d();
  BALLOT_ENFORCE(row_weights.empty() || row_weights.size() == n);
  const auto& kern = isa_kernels();
  CoordinateOutcome out;
  out.value.assign(d, 0.0f);
  std::vector<std::size_t> rows(n);
  for (std::size_t i = 0; i < n; ++i) rows[i] = i;

  // Optimistic pass: assume every row is finite and check while copying. The first non-finite
  // block stops it; one scan then names every non-finite row and the pass runs again without them
  // (so an adversary costs at most two extra reads, never a crash).
  for (int attempt = 0; attempt < 2; ++attempt) {
    const std::size_t m = rows.size();
    if (m == 0) return make_error(ErrorCode::kPrecondition, "every input is non-finite");
    BALLOT_ASSIGN_OR_RETURN(const CoordinatePlan plan, plan_for(m, n - m));
    BALLOT_ENFORCE(row_weights.empty() || plan.op == CoordinateOp::kMean);
    std::size_t need_lo = 0, need_hi = m;
    if (plan.op == CoordinateOp::kMedian) {
      need_lo = (m - 1) / 2;
      need_hi = m / 2 + 1;
    } else if (plan.op == CoordinateOp::kTrimmedMean) {
      BALLOT_ENFORCE_LT(2 * plan.trim, m);
      need_lo = plan.trim;
      need_hi = m - plan.trim;
    } else if (plan.op == CoordinateOp::kClosestWindow) {
      BALLOT_ENFORCE(plan.window >= 1 && plan.window <= m);
    }
    const WindowRanks window = plan.op == CoordinateOp::kClosestWindow ? window_ranks(m, plan.window) : WindowRanks{};
    if (plan.op == CoordinateOp::kClosestWindow) {
      need_lo = window.need_lo;
      need_hi = window.need_hi;
    }
    const bool use_network = m <= kNetworkMaxRows;
    SelectionPlan network;
    if (use_network && plan.op != CoordinateOp::kMean) network = selection_plan(m, need_lo, need_hi);

    // The mean keeps 8192 double sums (64 KiB, in L2) per block, whatever m. Measured idle
    // (2026-11-27, min of 30 calls, two alternating series, d = 1e6): 8192 columns against 512,
    // n = 10 2.6-2.8 against 2.7-2.8 ms, n = 25 6.0-6.3 against 7.1-7.3, n = 100 21.8-22.9 against
    // 25.5-26.4 (65536: no better, less steady). Under load (2026-11-25, CPU time) 512 had measured
    // best. The sums do not depend on it (each column adds its rows in order).
    const std::size_t columns = plan.op == CoordinateOp::kMean ? 8192 : block_columns(m);
    // The fused kernel has no column tail: whole blocks must be whole tiles (so whole vectors).
    BALLOT_ENFORCE(columns % kTile == 0);
    const std::size_t blocks = (d + columns - 1) / columns;
    std::atomic<bool> found_non_finite{false};
    const bool check = attempt == 0;
    parallel_for(blocks, threads, [&](std::size_t b0, std::size_t b1) {
      const bool mean = plan.op == CoordinateOp::kMean;
      std::vector<float> block(mean ? 0 : m * columns);  // columns is a multiple of kTile
      // Not read before it is written (the mean's first row group starts its sums from 0.0, and
      // up to kRegisterRows rows never store them): no zero fill.
      const auto sums = mean ? std::make_unique_for_overwrite<double[]>(columns) : nullptr;
      std::vector<const float*> pieces(mean ? m : 0);
      std::vector<float> weights(row_weights.empty() ? 0 : m);
      for (std::size_t r = 0; r < weights.size(); ++r) weights[r] = row_weights[rows[r]];
      std::vector<float> column(m);
      for (std::size_t b = b0; b < b1; ++b) {
        if (found_non_finite.load(std::memory_order_relaxed)) return;
        const std::size_t begin = b * columns, width = std::min(columns, d - begin);
        if (mean) {
          // No order statistics: each row's piece is added straight into double sums (row order,
          // as rows_mean does), read once and never copied.
          const std::size_t ahead = b + 1 < b1 ? std::min(columns, d - begin - width) : 0;
          for (std::size_t r = 0; r < m; ++r) pieces[r] = inputs.row(rows[r]) + begin;
          const bool finite = kern.mean_rows(pieces.data(), weights.empty() ? nullptr : weights.data(), m, width,
                                             sums.get(), out.value.data() + begin, ahead);
          if (check && !finite) {
            found_non_finite.store(true, std::memory_order_relaxed);
            return;
          }
          continue;
        }
        // Layout: tile t of row r at block[t·m·kTile + r·kTile], so each tile (all rows) is one
        // contiguous L1-sized piece.
        const std::size_t tile_floats = m * kTile;
        bool finite = true;
        const std::size_t ahead = b + 1 < b1 ? std::min(columns, d - begin - width) : 0;
        // Whole blocks: the groups of 16 rows the network starts by sorting go from the inputs
        // straight into sorted tiles (one pass instead of a copy and a sort); other blocks (and
        // the rules without a network) are copied.
        const bool fused = width == columns && network.sorted_wires > 0;
        if (fused) {
          for (std::size_t first = 0; first < m; first += 16) {
            const std::size_t group = std::min<std::size_t>(16, m - first);
            const float* group_rows[16];
            for (std::size_t r = 0; r < group; ++r) group_rows[r] = inputs.row(rows[first + r]) + begin;
            finite &=
                kern.gather_sort_groups16(group_rows, group, width, block.data() + first * kTile, tile_floats, ahead);
          }
        } else {
          for (std::size_t r = 0; r < m; ++r)
            finite &= kern.copy_finite_tiled(inputs.row(rows[r]) + begin, width, block.data() + r * kTile, tile_floats,
                                             inputs.row(rows[r]) + begin + width, ahead);
        }
        if (check && !finite) {
          found_non_finite.store(true, std::memory_order_relaxed);
          return;
        }
        for (std::size_t t = 0; t * kTile < width; ++t) {
          float* tile = block.data() + t * tile_floats;
          const std::size_t tw = std::min(kTile, width - t * kTile);
          float* dst = out.value.data() + begin + t * kTile;
          if (!use_network) {
            for (std::size_t j = 0; j < tw; ++j) {
              for (std::size_t r = 0; r < m; ++r) column[r] = tile[r * kTile + j];
              dst[j] = reduce_column(column, plan);
            }
            continue;
          }
          if (!fused) kern.sort_groups16(tile, kTile, tw, network.sorted_wires);
          kern.network(tile, kTile, tw, network.comparators.data(), network.comparators.size());
          if (plan.op != CoordinateOp::kClosestWindow) {
            kern.rows_mean(tile, kTile, tw, need_lo, need_hi, dst);
            continue;
          }
          kern.closest_window_mean(tile, kTile, tw, m, plan.window, window.first, window.last, dst);
          if (window.first == 0) continue;
          // A tie x[first − 1] == x[first] could let a lower window win: redo those columns with a
          // full sort and every start (rare: it needs two equal values next to the window).
          const float* below = tile + (window.first - 1) * kTile;
          const float* at = tile + window.first * kTile;
          for (std::size_t j = 0; j < tw; ++j) {
            if (below[j] != at[j]) continue;
            for (std::size_t r = 0; r < m; ++r) column[r] = tile[r * kTile + j];
            std::sort(column.begin(), column.end());
            kern.closest_window_mean(column.data(), 1, 1, m, plan.window, 0, m - plan.window, dst + j);
          }
        }
      }
    });
    if (!found_non_finite.load()) return out;
    out.non_finite = non_finite_rows(inputs, threads);
    rows = complement(n, out.non_finite);
  }
  return make_error(ErrorCode::kInternal, "coordinate_wise: non-finite rows after exclusion");
}

std::string with_threads(std::string spec, std::size_t threads) {
  if (threads != 1) spec += (spec.find(':') == std::string::npos ? ":threads=" : ",threads=") + std::to_string(threads);
  return spec;
}

Error precondition_error(const std::string& rule, const std::string& bound, std::size_t n, std::size_t f) {
  return make_error(ErrorCode::kPrecondition,
                    rule + " needs " + bound + " (n = " + std::to_string(n) + ", f = " + std::to_string(f) + ")");
}

Status check_not_empty(const InputMatrix& inputs) {
  if (inputs.n() == 0) return make_error(ErrorCode::kPrecondition, "no inputs to aggregate");
  return {};
}

double binomial(std::size_t n, std::size_t k) {
  k = std::min(k, n - k);
  double c = 1;
  for (std::size_t i = 1; i <= k; ++i) c = c * static_cast<double>(n - k + i) / static_cast<double>(i);
  return std::round(c);
}

}  // namespace ballot::robust::detail

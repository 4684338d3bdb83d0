#include "coding/detail/sparse.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/enforce.h"
#include "kernels/isa.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ballot::coding::detail {

namespace {

__extension__ using Uint128 = unsigned __int128;  // GCC/Clang extension

// The candidates of [begin, end) into dst (room for end - begin): indices i with !(|x_i| < t),
// i.e. |x_i| >= t or NaN, increasing. Returns how many. Branch-free, so the time does not depend
// on the selectivity; the scalar loop stores an index per element and keeps one.
std::size_t filter_block_scalar(const float* x, std::size_t begin, std::size_t end, float t, std::uint32_t* dst) {
  std::size_t count = 0;
  for (std::size_t i = begin; i < end; ++i) {
    dst[count] = static_cast<std::uint32_t>(i);
    count += !(std::fabs(x[i]) < t);
  }
  return count;
}

#if defined(__x86_64__)
// AVX-512: 16 magnitudes compared per instruction, the passing indices packed in order by
// vpcompressd, about 1/4 cycle per element: the pass runs at the read bandwidth. Same output as
// the scalar loop (NLT_UQ is true for NaN, as !(a < t) is).
__attribute__((target("avx512f"))) std::size_t filter_block_avx512(const float* x, std::size_t begin, std::size_t end,
                                                                   float t, std::uint32_t* dst) {
  const __m512 threshold = _mm512_set1_ps(t);
  const __m512i step = _mm512_set1_epi32(16);
  __m512i index = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(begin)),
                                   _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  std::size_t count = 0;
  std::size_t i = begin;
  for (; i + 16 <= end; i += 16) {
    const __m512 magnitude = _mm512_abs_ps(_mm512_loadu_ps(x + i));
    const __mmask16 keep = _mm512_cmp_ps_mask(magnitude, threshold, _CMP_NLT_UQ);
    // Packed in a register, then stored whole (dst has room: count ≤ i − begin): the compressing
    // store to memory is microcoded on AMD Zen 4 (codecs_bench, d = 2^24, Zen 4: top-k encode
    // 30–31 → 12.4–12.6 ms, threshold 22–24 → 3.8–4.1 ms).
    _mm512_storeu_si512(dst + count, _mm512_maskz_compress_epi32(keep, index));
    count += static_cast<std::size_t>(__builtin_popcount(keep));
    index = _mm512_add_epi32(index, step);
  }
  return count + filter_block_scalar(x, i, end, t, dst + count);
}
#endif

// Indices i in [0, n) with !(|x_i| < t): |x_i| >= t or NaN, in increasing order, appended.
void filter(const float* x, std::size_t n, float t, std::vector<std::uint32_t>& out) {
  auto* block = filter_block_scalar;
#if defined(__x86_64__)
  if (kernels::active_isa() == kernels::Isa::kAvx512) block = filter_block_avx512;
#endif
  std::size_t count = out.size();
  for (std::size_t begin = 0; begin < n; begin += 8192) {
    const std::size_t end = std::min(n, begin + 8192);
    out.resize(count + (end - begin));
    count += block(x, begin, end, t, out.data() + count);
  }
  out.resize(count);
}

// The k candidates with the largest key, in index order: the exact k-th largest key among them,
// then the larger ones and the lowest-index ties (so no sort of the output is needed).
// `candidates` are increasing and hold at least k entries.
void finish_top_k(const float* x, const std::vector<std::uint32_t>& candidates, std::size_t k,
                  std::vector<std::uint32_t>& indices) {
  BALLOT_ENFORCE_GE(candidates.size(), k);
  if (k == 0) return;
  std::vector<float> keys(candidates.size());
  for (std::size_t j = 0; j < candidates.size(); ++j) keys[j] = selection_key(x[candidates[j]]);
  std::vector<float> scratch = keys;
  std::nth_element(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(k - 1), scratch.end(),
                   std::greater<float>());
  const float kth = scratch[k - 1];
  std::size_t above = 0;
  for (float v : keys) above += v > kth;
  std::size_t ties = k - above;
  const std::size_t at = indices.size();
  indices.resize(at + k);
  std::size_t out = at;
  for (std::size_t j = 0; j < candidates.size() && out < at + k; ++j) {
    if (keys[j] > kth) {
      indices[out++] = candidates[j];
    } else if (keys[j] == kth && ties > 0) {
      --ties;
      indices[out++] = candidates[j];
    }
  }
  BALLOT_ENFORCE_EQ(out, at + k);
}

// The top k when no threshold above 0 is known (a short x, or a sample whose rank-th key is 0: a
// mostly-zero x, such as the mean of a few sparse messages). The coordinates whose key is above 0
// are the candidates. When there are fewer than k of them, they all belong to the top k, and the
// rest of it is the lowest-index zeros (±0). Either way no selection runs over the zeros.
void top_k_above_zero(const float* x, std::size_t n, std::size_t k, std::vector<std::uint32_t>& candidates,
                      std::vector<std::uint32_t>& indices) {
  candidates.clear();
  filter(x, n, std::numeric_limits<float>::denorm_min(), candidates);  // !(|x| < the least positive): not ±0
  if (candidates.size() >= k) {
    finish_top_k(x, candidates, k, indices);
    return;
  }
  std::size_t zeros = k - candidates.size();
  std::size_t j = 0;
  for (std::uint32_t i = 0; zeros > 0; ++i) {  // zeros ≤ n − candidates: it ends below n
    indices.push_back(i);
    if (j < candidates.size() && candidates[j] == i) {
      ++j;
    } else {
      --zeros;
    }
  }
  indices.insert(indices.end(), candidates.begin() + static_cast<std::ptrdiff_t>(j), candidates.end());
}

}  // namespace

void select_above(const float* x, std::size_t n, float threshold, std::vector<std::uint32_t>& indices) {
  BALLOT_ENFORCE_LE(n, std::size_t{UINT32_MAX});
  filter(x, n, threshold, indices);
}

void select_top_k(const float* x, std::size_t n, std::size_t k, std::vector<std::uint32_t>& indices) {
  BALLOT_ENFORCE_LE(n, std::size_t{UINT32_MAX});
  if (k == 0) return;
  if (k >= n) {
    const std::size_t at = indices.size();
    indices.resize(at + n);
    std::iota(indices.begin() + static_cast<std::ptrdiff_t>(at), indices.end(), 0u);
    return;
  }
  // 1. Threshold estimate from a strided sample (Aji & Heafield 2017 sample too; only speed
  //    depends on it, never the result). Aim for ~1.2 k candidates so one pass usually suffices.
  std::vector<std::uint32_t> candidates;
  constexpr std::size_t kSample = 1 << 15;
  bool have_candidates = false;
  if (n > 4 * kSample) {
    const std::size_t stride = n / kSample;
    std::vector<float> sample(kSample);
    for (std::size_t j = 0; j < kSample; ++j) sample[j] = selection_key(x[j * stride]);
    const double expected = static_cast<double>(k) * kSample / static_cast<double>(n);
    std::size_t rank = static_cast<std::size_t>(1.2 * expected + 3.0 * std::sqrt(expected) + 8.0);
    while (true) {
      if (rank >= kSample) break;
      std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(rank), sample.end(),
                       std::greater<float>());
      if (!(sample[rank] > 0.0f)) break;  // a threshold of 0 would pass every coordinate
      candidates.clear();
      filter(x, n, sample[rank], candidates);
      if (candidates.size() >= k) {
        have_candidates = true;
        break;
      }
      rank *= 4;  // the sample was unlucky: lower the threshold and pass again
    }
  }
  if (!have_candidates) {
    top_k_above_zero(x, n, k, candidates, indices);
    return;
  }
  finish_top_k(x, candidates, k, indices);
}

SampledSelection sampled_threshold_passes(std::span<float> sample_keys, std::size_t n, std::size_t k,
                                          const std::function<std::size_t(float)>& pass) {
  SampledSelection result;
  const std::size_t samples = sample_keys.size();
  // Lin et al. 2018, §3 / their code: the threshold is the k·m/n-th largest of the m sampled
  // magnitudes.
  const double expected = static_cast<double>(k) * static_cast<double>(samples) / static_cast<double>(n);
  std::size_t rank = std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(expected)));
  std::size_t count = 0;
  while (true) {
    ++result.passes;
    // The sample ran out (too few pass even at its smallest value): every coordinate is a
    // candidate, and the exact selection finishes.
    const bool exhausted = rank > samples;
    if (!exhausted) {
      std::nth_element(sample_keys.begin(), sample_keys.begin() + static_cast<std::ptrdiff_t>(rank - 1),
                       sample_keys.end(), std::greater<float>());
    }
    result.threshold = exhausted ? 0.0f : sample_keys[rank - 1];
    count = pass(result.threshold);
    if (result.passes == 1) result.first_pass = count;
    // Accept [kLowerBound·k, k]; lower the threshold (a larger sample rank) when too few pass.
    if (static_cast<double>(count) >= kSampledLowerBound * static_cast<double>(k) || exhausted) break;
    rank *= 2;
  }
  result.exact = count > k;  // too many pass (ties, or a low estimate): exact top-k among them
  result.selected = std::min(count, k);
  return result;
}

SampledSelection select_by_sampled_threshold(const float* x, std::size_t n, std::size_t k, std::size_t samples,
                                             Rng& rng, std::vector<std::uint32_t>& indices) {
  BALLOT_ENFORCE_LE(n, std::size_t{UINT32_MAX});
  SampledSelection result;
  if (k == 0 || n == 0) return result;
  if (k >= n || samples == 0 || samples >= n) {
    // Nothing to estimate: exact selection.
    result.exact = true;
    const std::size_t at = indices.size();
    select_top_k(x, n, k, indices);
    result.selected = indices.size() - at;
    return result;
  }
  // Drawn uniformly, with replacement, from the stream.
  std::vector<float> sample(samples);
  for (auto& v : sample) v = selection_key(x[rng.uniform_int(n)]);
  std::vector<std::uint32_t> candidates;
  result = sampled_threshold_passes(sample, n, k, [&](float threshold) {
    candidates.clear();
    select_above(x, n, threshold, candidates);
    return candidates.size();
  });
  if (result.exact && !(result.threshold > 0.0f)) {
    select_top_k(x, n, k, indices);  // every coordinate passed: the same top k, without a selection over zeros
  } else if (result.exact) {
    finish_top_k(x, candidates, k, indices);
  } else {
    indices.insert(indices.end(), candidates.begin(), candidates.end());
  }
  return result;
}

std::vector<std::size_t> sparse_budgets(std::span<const Segment> segments, std::size_t k, double ratio) {
  std::vector<std::size_t> budgets(segments.size(), 0);
  std::size_t d = 0;
  for (const auto& s : segments) d += s.size;
  if (k > 0) {
    const std::size_t total = std::min(k, d);
    if (d == 0) return budgets;
    // One entry for each non-empty segment first when the count allows it (as ⌈ratio · size⌉
    // gives): a layer with none would never be sent, which biases random-k there. The rest by
    // largest remainder (Hamilton) apportionment over what each segment has left.
    std::size_t non_empty = 0;
    for (const auto& s : segments) non_empty += s.size > 0 ? 1 : 0;
    const bool one_each = total >= non_empty;
    std::vector<std::size_t> room(segments.size());
    std::size_t room_total = 0, assigned = 0;
    for (std::size_t s = 0; s < segments.size(); ++s) {
      const std::size_t floor = one_each && segments[s].size > 0 ? 1 : 0;
      budgets[s] = floor;
      assigned += floor;
      room[s] = segments[s].size - floor;
      room_total += room[s];
    }
    const std::size_t rest = total - assigned;
    if (rest == 0) return budgets;
    std::vector<std::pair<Uint128, std::size_t>> remainders;
    for (std::size_t s = 0; s < segments.size(); ++s) {
      const Uint128 product = static_cast<Uint128>(rest) * room[s];
      const auto share = static_cast<std::size_t>(product / room_total);
      budgets[s] += share;
      assigned += share;
      remainders.emplace_back(product % room_total, s);
    }
    std::stable_sort(remainders.begin(), remainders.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (std::size_t j = 0; assigned < total; ++j) {
      ++budgets[remainders[j].second];
      ++assigned;
    }
    return budgets;
  }
  for (std::size_t s = 0; s < segments.size(); ++s) {
    // ⌈ratio · size⌉ of the ratio as written: 0.07 · 100 is 7.000000000000001 in binary and must
    // give 7, not 8. The product is within a few ulps of the decimal one, and a product that is
    // not an integer in decimal lies far more than that above the integer below it.
    const double product = ratio * static_cast<double>(segments[s].size);
    const double want = std::ceil(product * (1.0 - 4 * std::numeric_limits<double>::epsilon()));
    budgets[s] = want >= static_cast<double>(segments[s].size) ? segments[s].size : static_cast<std::size_t>(want);
  }
  return budgets;
}

EncodedGradient write_sparse(CodecId id, Granularity granularity, std::uint8_t flags, const GradientLayout& layout,
                             std::span<const std::size_t> counts, std::span<const std::uint32_t> indices,
                             std::span<const float> values) {
  BALLOT_ENFORCE_EQ(indices.size(), values.size());
  EncodedGradient out;
  write_header(out.bytes, id, granularity, flags, layout, 4 * counts.size() + 8 * indices.size());
  for (std::size_t c : counts) {
    BALLOT_ENFORCE_LE(c, std::size_t{UINT32_MAX});
    append_pod<std::uint32_t>(out.bytes, static_cast<std::uint32_t>(c));
  }
  append_pods(out.bytes, indices);
  append_pods(out.bytes, values);
  return out;
}

// The per-segment counts of a sparse message (u32 each), each at most its segment's size.
static Result<std::vector<std::uint32_t>> read_counts(ByteReader& reader, std::span<const Segment> segments) {
  BALLOT_ASSIGN_OR_RETURN(const auto count_bytes, reader.take(segments.size(), 4, "counts"));
  std::vector<std::uint32_t> counts(segments.size());
  for (std::size_t s = 0; s < segments.size(); ++s) {
    counts[s] = load_pod<std::uint32_t>(count_bytes.data() + 4 * s);
    if (counts[s] > segments[s].size) {
      return malformed("sparse count " + std::to_string(counts[s]) + " exceeds segment " + std::to_string(s) +
                       " of size " + std::to_string(segments[s].size));
    }
  }
  return counts;
}

Result<RandomKView> read_random_k(std::span<const std::uint8_t> bytes, const GradientLayout& layout) {
  BALLOT_ASSIGN_OR_RETURN(const WireHeader header, read_header(bytes, CodecId::kRandomK, 0, layout));
  RandomKView view;
  view.segments = segments_of(layout, header.granularity);
  ByteReader reader(bytes, "encoded gradient", kHeaderBytes);
  BALLOT_ASSIGN_OR_RETURN(view.counts, read_counts(reader, view.segments));
  std::size_t sum = 0;
  for (const std::uint32_t count : view.counts) sum += count;
  BALLOT_ASSIGN_OR_RETURN(view.seed, reader.read<std::uint64_t>("seed"));
  BALLOT_ASSIGN_OR_RETURN(view.stream, reader.read<std::uint64_t>("stream"));
  BALLOT_ASSIGN_OR_RETURN(view.position, reader.read<std::uint64_t>("position"));
  BALLOT_ASSIGN_OR_RETURN(view.values, reader.take(sum, 4, "values"));
  BALLOT_TRY(reader.expect_end());
  return view;
}

Result<SparseView> read_sparse(std::span<const std::uint8_t> bytes, CodecId id, std::uint8_t allowed_flags,
                               const GradientLayout& layout) {
  SparseView view;
  BALLOT_ASSIGN_OR_RETURN(view.header, read_header(bytes, id, allowed_flags, layout));
  view.segments = segments_of(layout, view.header.granularity);
  ByteReader reader(bytes, "encoded gradient", kHeaderBytes);
  BALLOT_ASSIGN_OR_RETURN(view.counts, read_counts(reader, view.segments));
  std::size_t total = 0;
  for (const std::uint32_t count : view.counts) total += count;  // <= d: no overflow
  BALLOT_ASSIGN_OR_RETURN(view.indices, reader.take(total, 4, "indices"));
  BALLOT_ASSIGN_OR_RETURN(view.values, reader.take(total, 4, "values"));
  BALLOT_TRY(reader.expect_end());
  std::size_t j = 0;
  for (std::size_t s = 0; s < view.segments.size(); ++s) {
    std::uint64_t previous = 0;
    for (std::uint32_t c = 0; c < view.counts[s]; ++c, ++j) {
      const std::uint32_t index = load_pod<std::uint32_t>(view.indices.data() + 4 * j);
      if (index >= view.segments[s].size) {
        return malformed("sparse index " + std::to_string(index) + " out of segment " + std::to_string(s) +
                         " of size " + std::to_string(view.segments[s].size));
      }
      if (c > 0 && index <= previous) {
        return malformed("sparse indices not strictly increasing in segment " + std::to_string(s));
      }
      previous = index;
    }
  }
  return view;
}

void add_sparse(const SparseView& view, std::span<float> accumulator, float weight) {
  std::size_t j = 0;
  for (std::size_t s = 0; s < view.segments.size(); ++s) {
    float* base = accumulator.data() + view.segments[s].offset;
    for (std::uint32_t c = 0; c < view.counts[s]; ++c, ++j) {
      base[load_pod<std::uint32_t>(view.indices.data() + 4 * j)] +=
          weight * load_pod<float>(view.values.data() + 4 * j);
    }
  }
}

SparseGradient entries_of(const SparseView& view) {
  SparseGradient out;
  std::size_t total = 0;
  for (const std::uint32_t count : view.counts) total += count;
  out.indices.reserve(total);
  out.values.reserve(total);
  std::size_t j = 0;
  for (std::size_t s = 0; s < view.segments.size(); ++s) {
    for (std::uint32_t c = 0; c < view.counts[s]; ++c, ++j) {
      out.indices.push_back(view.segments[s].offset + load_pod<std::uint32_t>(view.indices.data() + 4 * j));
      out.values.push_back(0.0f + load_pod<float>(view.values.data() + 4 * j));
    }
  }
  return out;
}

}  // namespace ballot::coding::detail

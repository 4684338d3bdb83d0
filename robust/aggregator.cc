#include "robust/aggregator.h"

#include <array>
#include <cstdint>
#include <mutex>

#include "core/enforce.h"

// Under AddressSanitizer blocks are never kept, so that a use after free stays detectable.
#if defined(__SANITIZE_ADDRESS__)
#define BALLOT_KEEP_OUTPUT_BLOCKS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BALLOT_KEEP_OUTPUT_BLOCKS 0
#endif
#endif
#ifndef BALLOT_KEEP_OUTPUT_BLOCKS
#define BALLOT_KEEP_OUTPUT_BLOCKS 1
#endif

namespace ballot::robust {

namespace detail {
namespace {

constexpr std::align_val_t kOutputAlignment{64};
constexpr std::size_t kMaxKeptBlocks = 4;
constexpr std::size_t kMaxKeptBytes = std::size_t{1} << 30;

struct KeptBlock {
  void* block = nullptr;
  std::size_t bytes = 0;
};

// A fixed array, so that keeping a block never allocates (release_output is noexcept).
struct KeptBlocks {
  std::mutex mutex;
  std::array<KeptBlock, kMaxKeptBlocks> blocks;  // [0, count), oldest first
  std::size_t count = 0;
  std::size_t bytes = 0;

  void erase(std::size_t i) {
    bytes -= blocks[i].bytes;
    for (std::size_t j = i + 1; j < count; ++j) blocks[j - 1] = blocks[j];
    --count;
  }
};

// Never destroyed: a Matrix with static storage duration may be freed after any other static.
KeptBlocks& kept_blocks() {
  static KeptBlocks* kept = new KeptBlocks;
  return *kept;
}

}  // namespace

void* allocate_output(std::size_t bytes) {
  if (BALLOT_KEEP_OUTPUT_BLOCKS && bytes >= kRecycledBytes) {
    KeptBlocks& kept = kept_blocks();
    std::lock_guard lock(kept.mutex);
    for (std::size_t i = kept.count; i-- > 0;) {
      if (kept.blocks[i].bytes != bytes) continue;
      void* block = kept.blocks[i].block;
      kept.erase(i);
      return block;
    }
  }
  return ::operator new(bytes, kOutputAlignment);
}

void release_output(void* block, std::size_t bytes) noexcept {
  if (block == nullptr) return;
  if (BALLOT_KEEP_OUTPUT_BLOCKS && bytes >= kRecycledBytes && bytes <= kMaxKeptBytes) {
    std::array<void*, kMaxKeptBlocks> evicted{};
    std::size_t count = 0;
    {
      KeptBlocks& kept = kept_blocks();
      std::lock_guard lock(kept.mutex);
      while (kept.count > 0 && (kept.count == kMaxKeptBlocks || kept.bytes + bytes > kMaxKeptBytes)) {
        evicted[count++] = kept.blocks[0].block;
        kept.erase(0);
      }
      kept.blocks[kept.count++] = {block, bytes};
      kept.bytes += bytes;
    }
    // Unmapping hundreds of MB takes a while: not under the lock.
    for (std::size_t i = 0; i < count; ++i) ::operator delete(evicted[i], kOutputAlignment);
    return;
  }
  ::operator delete(block, kOutputAlignment);
}

}  // namespace detail

InputMatrix::InputMatrix(const float* data, std::size_t n, std::size_t d) : rows_(n), d_(d) {
  for (std::size_t i = 0; i < n; ++i) rows_[i] = data + i * d;
}

Result<InputMatrix> InputMatrix::from_buffer(std::span<const float> data, std::size_t n) {
  if (n == 0) {
    if (!data.empty()) return make_error(ErrorCode::kInvalidArgument, "a non-empty buffer holds no rows (n = 0)");
    return InputMatrix();
  }
  if (data.size() % n != 0)
    return make_error(ErrorCode::kInvalidArgument, "buffer of " + std::to_string(data.size()) +
                                                       " floats is not a multiple of n = " + std::to_string(n));
  return InputMatrix(data.data(), n, data.size() / n);
}

Result<InputMatrix> InputMatrix::from_rows(std::span<const std::span<const float>> rows) {
  InputMatrix out;
  if (rows.empty()) return out;
  out.d_ = rows[0].size();
  out.rows_.reserve(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].size() != out.d_)
      return make_error(ErrorCode::kInvalidArgument, "input " + std::to_string(i) + " has " +
                                                         std::to_string(rows[i].size()) + " values, input 0 has " +
                                                         std::to_string(out.d_));
    out.rows_.push_back(rows[i].data());
  }
  return out;
}

Result<InputMatrix> InputMatrix::from_rows(const std::vector<std::vector<float>>& rows) {
  std::vector<std::span<const float>> spans(rows.begin(), rows.end());
  return from_rows(std::span<const std::span<const float>>(spans));
}

InputMatrix InputMatrix::subset(std::span<const std::size_t> indices) const {
  InputMatrix out;
  out.d_ = d_;
  out.rows_.reserve(indices.size());
  for (std::size_t i : indices) {
    BALLOT_ENFORCE_LT(i, rows_.size());
    out.rows_.push_back(rows_[i]);
  }
  return out;
}

std::size_t InputMatrix::uniform_stride() const noexcept {
  if (rows_.size() < 2) return d_ == 0 ? 1 : d_;
  // Integer addresses: the rows may belong to unrelated allocations.
  auto address = [this](std::size_t i) { return reinterpret_cast<std::uintptr_t>(rows_[i]); };
  if (address(1) <= address(0)) return 0;
  const std::uintptr_t step = address(1) - address(0);
  if (step % sizeof(float) != 0 || step / sizeof(float) < d_) return 0;
  for (std::size_t i = 2; i < rows_.size(); ++i)
    if (address(i) <= address(i - 1) || address(i) - address(i - 1) != step) return 0;
  return step / sizeof(float);
}

Result<AggregationResult> Aggregator::aggregate(std::span<const std::span<const float>> rows) {
  BALLOT_ASSIGN_OR_RETURN(const InputMatrix inputs, InputMatrix::from_rows(rows));
  return aggregate(inputs);
}

Result<std::optional<RowScales>> PreAggregator::row_scales(const InputMatrix&) { return std::optional<RowScales>{}; }

}  // namespace ballot::robust

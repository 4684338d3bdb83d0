#include "core/aligned_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace ballot {
namespace {

TEST(AlignedAllocator, VectorsAreCacheLineAligned) {
  for (std::size_t count : {1u, 3u, 17u, 1000u}) {
    AlignedVector<float> floats(count);
    AlignedVector<std::uint64_t> words(count);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(floats.data()) % kCacheLineBytes, 0u);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(words.data()) % kCacheLineBytes, 0u);
  }
}

TEST(AlignedAllocator, CustomAlignmentAndRebind) {
  std::vector<char, AlignedAllocator<char, 256>> bytes(5);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(bytes.data()) % 256, 0u);
  AlignedAllocator<int> ints;
  AlignedAllocator<double> doubles(ints);
  EXPECT_TRUE(ints == AlignedAllocator<int>(doubles));
}

}  // namespace
}  // namespace ballot

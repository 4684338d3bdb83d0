// Helper for rng_test: prints the first N words of Rng(seed, stream) in another process.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "core/rng.h"

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  ballot::Rng rng(std::strtoull(argv[1], nullptr, 10), std::strtoull(argv[2], nullptr, 10));
  const long count = std::strtol(argv[3], nullptr, 10);
  for (long i = 0; i < count; ++i) std::printf("%" PRIu32 "\n", rng.next_u32());
  return 0;
}

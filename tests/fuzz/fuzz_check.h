// The fuzz targets' assertion: a property that does not hold aborts, which libFuzzer and the
// replay driver (standalone_driver.cc) report as a crash, with the input that caused it.
#pragma once

#include <cstdlib>

namespace ballot::fuzzing {

inline void check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace ballot::fuzzing

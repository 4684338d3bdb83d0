#include "core/host_device.h"

#include <gtest/gtest.h>

namespace {

BALLOT_HOST_DEVICE inline int twice(int x) { return 2 * x; }

// In a host compiler the macro is empty, so shared functions are ordinary inline functions.
TEST(HostDevice, SharedFunctionsAreOrdinaryOnTheHost) {
  EXPECT_EQ(twice(21), 42);
#define BALLOT_TEST_STRINGIFY_(x) #x
#define BALLOT_TEST_STRINGIFY(x) BALLOT_TEST_STRINGIFY_(x)
  EXPECT_STREQ(BALLOT_TEST_STRINGIFY(BALLOT_HOST_DEVICE), "");
}

}  // namespace

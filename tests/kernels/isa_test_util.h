// Test helper: run a test body once per ISA level, skipping levels this CPU lacks.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "kernels/isa.h"

namespace ballot::kernels {

class PerIsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) {
      GTEST_SKIP() << "this CPU has no " << isa_name(GetParam());
    }
    cap_ = std::make_unique<ScopedIsaLimit>(GetParam());
    ASSERT_EQ(active_isa(), GetParam());
  }
  void TearDown() override { cap_.reset(); }

 private:
  std::unique_ptr<ScopedIsaLimit> cap_;
};

inline std::string isa_param_name(const ::testing::TestParamInfo<Isa>& info) {
  return std::string(isa_name(info.param));
}

#define BALLOT_INSTANTIATE_PER_ISA(Suite) \
  INSTANTIATE_TEST_SUITE_P(AllIsas, Suite, ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512), isa_param_name)

}  // namespace ballot::kernels

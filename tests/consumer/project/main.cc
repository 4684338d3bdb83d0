// Uses the installed headers and libraries: pack two sign vectors, vote, check the answer.
#include <cstdio>
#include <vector>

#include "core/config.h"
#include "kernels/majority_vote.h"
#include "kernels/sign_kernels.h"

int main() {
  const std::vector<float> a{1.0f, -2.0f, 0.0f}, b{-1.0f, -1.0f, 3.0f}, c{2.0f, 5.0f, -1.0f};
  const std::vector<ballot::BitVector> votes{ballot::kernels::pack_signs(a),
                                             ballot::kernels::pack_signs(b),
                                             ballot::kernels::pack_signs(c)};
  ballot::BitVector result;
  ballot::kernels::majority_vote(votes, result);
  const bool ok = result.get(0) && !result.get(1) && result.get(2);
  std::printf("ballot %s consumer: vote %s\n", BALLOT_VERSION_STRING, ok ? "correct" : "WRONG");
  return ok ? 0 : 1;
}

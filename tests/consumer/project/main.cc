// Uses the installed headers and libraries of every module: a sign vote (kernels), an update rule
// (learning), a robust rule (robust), a codec round trip (coding), an election code certificate (coding), an envelope
// signature (transport) and a protocol payload (runtime).
#include <cstdio>
#include <vector>

#include "coding/allocation_matrix.h"
#include "coding/codec_registry.h"
#include "core/config.h"
#include "core/rng.h"
#include "kernels/majority_vote.h"
#include "kernels/sign_kernels.h"
#include "learning/optimizer.h"
#include "robust/registry.h"
#include "runtime/messages.h"
#include "transport/crypto.h"

namespace {
bool check(bool condition, const char* what) {
  if (!condition) std::printf("consumer check failed: %s\n", what);
  return condition;
}
}  // namespace

int main() {
  bool ok = true;
  const std::vector<float> a{1.0f, -2.0f, 0.0f}, b{-1.0f, -1.0f, 3.0f}, c{2.0f, 5.0f, -1.0f};
  const std::vector<ballot::BitVector> votes{ballot::kernels::pack_signs(a), ballot::kernels::pack_signs(b),
                                             ballot::kernels::pack_signs(c)};
  ballot::BitVector result;
  ballot::kernels::majority_vote(votes, result);
  ok &= check(result.get(0) && !result.get(1) && result.get(2), "majority vote");

  auto update = ballot::learning::make_optimizer("sign", ballot::GradientLayout::whole(3));
  std::vector<float> params{0.0f, 0.0f, 0.0f};
  if (update.ok()) update.value()->step_vote(params, result, 0.5);
  ok &= check(update.ok() && params[0] == -0.5f && params[1] == 0.5f, "sign update rule");

  auto median = ballot::robust::make_aggregator("median");
  const std::vector<std::vector<float>> rows{a, b, c};  // the view below points into these
  auto inputs = ballot::robust::InputMatrix::from_rows(rows);
  auto aggregated = median.value()->aggregate(inputs.value());
  ok &= check(aggregated.ok() && aggregated->value[0] == 1.0f, "median");

  auto codec = ballot::coding::make_codec("fp32");
  ballot::Rng rng(1);
  const auto layout = ballot::GradientLayout::whole(3);
  auto decoded = codec.value()->decode(codec.value()->encode(a, layout, rng).bytes, layout);
  ok &= check(decoded.ok() && *decoded == a, "fp32 codec round trip");

  ok &= check(ballot::coding::AllocationMatrix::paper_n5().ones() == 19, "paper n = 5 code");

  auto key = ballot::transport::SigningKey::generate();
  const std::vector<std::uint8_t> message{1, 2, 3};
  ok &= check(key.ok() && key->verify_key().verify(message, key->sign(message)), "Ed25519");

  ok &= check(ballot::runtime::decode_control(ballot::runtime::encode(ballot::runtime::Join{7})).ok(), "Join payload");

  std::printf("ballot %s consumer: %s\n", BALLOT_VERSION_STRING, ok ? "all modules work" : "WRONG");
  return ok ? 0 : 1;
}

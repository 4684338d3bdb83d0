// Fuzz target for every decoder of peer-controlled transport bytes: the frame header, the whole
// frame with its envelope, the equivocation proof, and the verifier behind them. Invariants:
// nothing crashes or reads out of bounds, nothing large is allocated (the decoders allocate
// nothing from lengths), a decoded envelope re-encodes to the same bytes, and the verifier
// accepts only frames signed by the registered key.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "tests/fuzz/fuzz_check.h"
#include "transport/envelope.h"
#include "transport/frame.h"
#include "transport/verifier.h"

namespace {

using namespace ballot::transport;

// The key the seed corpus was signed with: node 1, job 7 (see tests/fuzz/corpus/frame_decode).
constexpr std::uint8_t kSeed[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                                    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

struct Fixture {
  Fixture() : key(SigningKey::from_seed(kSeed).value()), verifier(make_registry(key), options()) {}
  static Registry make_registry(const SigningKey& key) {
    Registry registry;
    (void)registry.add(1, Role::kNode, key.verify_key());
    return registry;
  }
  static VerifierOptions options() {
    VerifierOptions o;
    o.job = 7;
    return o;
  }
  SigningKey key;
  Verifier verifier;
};

using ballot::fuzzing::check;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Fixture fixture;
  const ByteSpan bytes(data, size);
  FrameLimits limits;
  limits.set_limit(MessageType::kPartitionSigns, 1 << 16);  // small, so the fuzzer also hits the limit

  if (size >= kFrameHeaderSize) {
    auto header = decode_frame_header(bytes.first(kFrameHeaderSize), limits);
    if (header.ok()) {
      check(header->payload_length <= limits.limit(header->type));
      check(header->body_length() >= header->payload_length);  // no wrap-around
      const auto encoded = encode_frame_header(*header);
      check(std::memcmp(encoded.data(), data, kFrameHeaderSize) == 0);
    }
  }

  auto frame = decode_frame(bytes, limits);
  if (frame.ok()) {
    check(frame->payload.size() == frame->header.payload_length);
    check(frame->payload.data() + frame->payload.size() == data + size);
    if (frame->envelope) {
      const auto meta = encode_envelope(*frame->envelope);
      check(std::memcmp(meta.data(), data + kFrameHeaderSize, kEnvelopeMetaSize) == 0);
      const Verdict verdict = fixture.verifier.verify(*frame->envelope, frame->payload, std::nullopt);
      if (verdict.ok()) {
        // Accepted: it must really be node 1's signature over exactly this payload.
        check(frame->envelope->header.sender == 1);
        check(verify_envelope_signature(*frame->envelope, fixture.key.verify_key()));
        check(payload_digest(frame->payload) == frame->envelope->header.payload_digest);
      }
    }
  }

  auto proof = EquivocationProof::decode(bytes);
  if (proof.ok()) {
    const auto encoded = proof->encode();
    check(encoded.size() == size && std::memcmp(encoded.data(), data, size) == 0);
    (void)check_equivocation_proof(*proof, fixture.verifier.registry());
  }
  return 0;
}

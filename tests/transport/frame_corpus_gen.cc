// Writes the seed corpus of the frame_decode fuzz target (tests/fuzz/frame_decode_fuzz.cc):
// signed frames of several types and sizes (one spanning several 16 KiB digest leaves), an
// unsigned frame, a truncated one, an oversize header, a frame of the previous protocol version
// and an equivocation proof, all signed by the fuzz target's fixed key (node 1, job 7).
// Deterministic (fixed key, sequence numbers and payloads), so `--check DIR` verifies that the
// committed corpus is what this program produces (ctest transport_frame_corpus_current).
//   frame_corpus_gen DIR          write the files
//   frame_corpus_gen --check DIR  exit 1 if any file is missing or different
#include <memory>
#include <string>
#include <vector>

#include "tests/fuzz/corpus_seeds.h"
#include "transport/envelope.h"
#include "transport/frame.h"

namespace {

using namespace ballot::transport;

constexpr std::uint8_t kSeed[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                                    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
constexpr std::uint64_t kJob = 7;
constexpr NodeId kSender = 1;

using Seed = ballot::fuzzing::CorpusSeed;

std::vector<std::uint8_t> payload(std::size_t n, std::uint8_t step) {
  std::vector<std::uint8_t> bytes(n);
  for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::uint8_t>(i * step);
  return bytes;
}

SignedEnvelope envelope(const SigningKey& key, MessageType type, std::uint64_t round, std::uint64_t sequence,
                        const std::vector<std::uint8_t>& body) {
  EnvelopeHeader h;
  h.job = kJob;
  h.sender = kSender;
  h.role = Role::kNode;
  h.type = type;
  h.round = round;
  h.sequence = sequence;
  h.payload_length = body.size();
  h.payload_digest = payload_digest(body);
  return sign_envelope(h, key);
}

std::vector<std::uint8_t> signed_frame(const SigningKey& key, MessageType type, std::uint64_t round,
                                       std::uint64_t sequence, const std::vector<std::uint8_t>& body) {
  FrameHeader header;
  header.type = type;
  header.flags = kFrameFlagSigned;
  header.meta_length = kEnvelopeMetaSize;
  header.payload_length = body.size();
  const auto head = encode_frame_header(header);
  const auto meta = encode_envelope(envelope(key, type, round, sequence, body));
  std::vector<std::uint8_t> bytes(head.begin(), head.end());
  bytes.insert(bytes.end(), meta.begin(), meta.end());
  bytes.insert(bytes.end(), body.begin(), body.end());
  return bytes;
}

std::vector<Seed> seeds() {
  const SigningKey key = SigningKey::from_seed(kSeed).value();
  std::vector<Seed> out;
  std::vector<std::uint8_t> hello(4);
  hello[0] = static_cast<std::uint8_t>(kSender);
  out.push_back({"signed_hello", signed_frame(key, MessageType::kHello, 0, 1000, hello)});
  out.push_back({"signed_control_empty", signed_frame(key, MessageType::kControl, 0, 1001, {})});
  out.push_back({"signed_vote_64", signed_frame(key, MessageType::kVote, 0, 1002, payload(64, 3))});
  out.push_back({"signed_gradient_300", signed_frame(key, MessageType::kPartitionSigns, 1, 1003, payload(300, 5))});
  // Three digest leaves (two full, one partial): the tree path of payload_digest.
  out.push_back({"signed_gradient_3_leaves",
                 signed_frame(key, MessageType::kPartitionSigns, 1, 1004, payload(2 * kPayloadLeafSize + 100, 11))});
  auto truncated = signed_frame(key, MessageType::kVote, 0, 1005, payload(64, 3));
  truncated.resize(100);
  out.push_back({"truncated_vote", truncated});
  auto old_version = signed_frame(key, MessageType::kVote, 0, 1006, payload(64, 3));
  old_version[4] = 1;  // protocol version 1: rejected at the version byte
  out.push_back({"version1_vote", old_version});
  FrameHeader unsigned_header;
  unsigned_header.type = MessageType::kPartitionSigns;
  unsigned_header.payload_length = 32;
  const auto head = encode_frame_header(unsigned_header);
  std::vector<std::uint8_t> unsigned_frame(head.begin(), head.end());
  const auto body = payload(32, 7);
  unsigned_frame.insert(unsigned_frame.end(), body.begin(), body.end());
  out.push_back({"unsigned_gradient_32", unsigned_frame});
  auto oversize = std::vector<std::uint8_t>(head.begin(), head.end());
  std::memset(oversize.data() + 16, 0xff, 8);  // payload length 2^64 - 1
  out.push_back({"oversize_header", oversize});
  const EquivocationProof proof{envelope(key, MessageType::kPartitionSigns, 2, 1007, payload(10, 1)),
                                envelope(key, MessageType::kPartitionSigns, 2, 1008, payload(11, 1))};
  out.push_back({"equivocation_proof", proof.encode()});
  return out;
}

}  // namespace

int main(int argc, char** argv) { return ballot::fuzzing::write_or_check_corpus(argc, argv, seeds()); }

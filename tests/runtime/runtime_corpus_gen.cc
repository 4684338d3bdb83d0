// Writes the seed corpora of the runtime's decode fuzz targets (tests/runtime/*_decode_fuzz.cc):
// every round-protocol message (runtime/messages.h) at the dimensions the target tries, checkpoints
// (runtime/checkpoint.h), signed records (runtime/signed_record.h) and decision logs
// (runtime/decision_log.h). Deterministic (fixed key, values and sequence numbers), so `--check`
// verifies the committed corpora (ctest runtime_corpus_current): a format change cannot leave
// them behind.
//   runtime_corpus_gen CHECKPOINT_DIR MESSAGES_DIR SIGNED_RECORD_DIR DECISION_LOG_DIR
//   runtime_corpus_gen --check CHECKPOINT_DIR MESSAGES_DIR SIGNED_RECORD_DIR DECISION_LOG_DIR
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/checkpoint.h"
#include "runtime/decision_log.h"
#include "runtime/messages.h"
#include "runtime/signed_record.h"
#include "tests/fuzz/corpus_seeds.h"
#include "transport/envelope.h"

namespace {

using namespace ballot;
using namespace ballot::runtime;
using fuzzing::CorpusSeed;

constexpr std::uint8_t kSeed[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                                    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

std::vector<std::uint8_t> ramp(std::size_t n, std::uint8_t step) {
  std::vector<std::uint8_t> bytes(n);
  for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::uint8_t>(i * step + 1);
  return bytes;
}

transport::Digest digest(std::uint8_t step) {
  transport::Digest d{};
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<std::uint8_t>(i * step);
  return d;
}

BitVector signs(std::size_t d) {
  BitVector v(d);
  for (std::size_t i = 0; i < d; i += 3) v.set(i, true);
  return v;
}

transport::SignedEnvelope envelope(const transport::SigningKey& key, transport::MessageType type, std::uint64_t round,
                                   std::uint64_t sequence, std::size_t length) {
  transport::EnvelopeHeader h;
  h.job = 7;
  h.sender = 1;
  h.role = transport::Role::kNode;
  h.type = type;
  h.round = round;
  h.sequence = sequence;
  h.payload_length = length;
  h.payload_digest = transport::payload_digest(ramp(length, 5));
  return transport::sign_envelope(h, key);
}

std::vector<CorpusSeed> message_seeds(const transport::SigningKey& key) {
  std::vector<CorpusSeed> out;
  out.push_back({"round_start", encode(RoundStart{12, 30000, digest(3)})});
  for (std::size_t d : {std::size_t{1}, std::size_t{65}}) {
    out.push_back({"vote_" + std::to_string(d), encode(Vote{12, 0.75, digest(5), signs(d)})});
  }
  AuditedVote audited{Vote{12, 0.5, digest(7), signs(65)}, {}};
  audited.inputs.push_back(envelope(key, transport::MessageType::kPartitionSigns, 12, 500, 40));
  audited.inputs.push_back(envelope(key, transport::MessageType::kPartitionSigns, 12, 501, 41));
  out.push_back({"audited_vote_65", encode(audited)});
  out.push_back({"audited_vote_0_inputs", encode(AuditedVote{Vote{3, 1.0, digest(9), signs(130)}, {}})});
  out.push_back({"decision_64", encode(Decision{12, {0.001f, 0.0001f}, true, signs(64)})});
  out.push_back({"decision_130", encode(Decision{13, {0.5f, 0.0f}, false, signs(130)})});
  out.push_back({"encoded_vote", encode(EncodedVote{12, 0.25, digest(11), ramp(18, 7)})});
  out.push_back({"float_decision_3", encode(FloatDecision{12, {0.05f, 0.0f}, false, {0.5f, -1.25f, 3.0f}})});
  std::vector<float> sparse(100, 0.0f);
  sparse[4] = 0.25f, sparse[50] = -0.0f, sparse[99] = -2.0f;
  out.push_back({"float_decision_100_sparse", encode(FloatDecision{12, {0.05f, 0.0f}, true, sparse})});
  out.push_back({"decision_piece", encode(DecisionPiece{12, 1, 3, 100, ramp(33, 5)})});
  // Piece 1 of 2 of a vote of 130 coordinates (3 words): its words [1, 3), the last one partial.
  out.push_back({"vote_piece_130", encode(VotePiece{12, 0.5, digest(13), 130, 1, 2, {0x0123456789abcdefULL, 3}})});
  const auto piece = encode(DecisionPiece{12, 0, 2, 64, ramp(32, 3)});
  out.push_back(
      {"relayed_piece",
       encode(RelayedPiece{envelope(key, transport::MessageType::kDecisionPiece, 12, 700, piece.size()), piece})});
  out.push_back({"decision_request", encode(DecisionRequest{12})});
  out.push_back({"join", encode(Join{4})});
  out.push_back({"finish", encode(Finish{200})});
  const transport::EquivocationProof proof{envelope(key, transport::MessageType::kVote, 2, 600, 10),
                                           envelope(key, transport::MessageType::kVote, 2, 601, 11)};
  out.push_back({"evidence", encode(Evidence{proof})});
  return out;
}

std::vector<CorpusSeed> checkpoint_seeds() {
  std::vector<CorpusSeed> out;
  out.push_back({"empty", encode_checkpoint(Checkpoint{})});
  Checkpoint two{42, {}};
  two.sections["model"] = ramp(40, 3);
  two.sections["optimizer"] = ramp(17, 9);
  out.push_back({"two_sections", encode_checkpoint(two)});
  Checkpoint with_empty{7, {}};
  with_empty.sections["a"] = {};
  with_empty.sections["node-state"] = ramp(300, 1);
  out.push_back({"empty_section", encode_checkpoint(with_empty)});
  return out;
}

std::vector<CorpusSeed> signed_record_seeds(const transport::SigningKey& key) {
  std::vector<CorpusSeed> out;
  out.push_back({"empty", encode_signed_record({})});
  const std::vector<transport::SignedEnvelope> entries{
      envelope(key, transport::MessageType::kVote, 3, 700, 24),
      envelope(key, transport::MessageType::kPartitionSigns, 3, 701, 300)};
  out.push_back({"vote_and_gradient", encode_signed_record(entries)});
  return out;
}

std::vector<CorpusSeed> decision_log_seeds() {
  std::vector<CorpusSeed> out;
  out.push_back({"empty", encode_decision_log_header(20)});
  std::vector<std::uint8_t> three = encode_decision_log_header(20);
  for (std::uint64_t round = 20; round < 23; ++round) {
    const auto record = encode_decision_record(round, ramp(100 + 37 * (round - 20), static_cast<std::uint8_t>(round)));
    three.insert(three.end(), record.begin(), record.end());
  }
  out.push_back({"three_decisions", three});
  auto torn = three;
  torn.erase(torn.end() - 40, torn.end());
  out.push_back({"torn_tail", torn});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const bool check = argc == 6 && std::strcmp(argv[1], "--check") == 0;
  if (argc != 5 && !check) {
    std::fprintf(stderr, "usage: %s [--check] CHECKPOINT_DIR MESSAGES_DIR SIGNED_RECORD_DIR DECISION_LOG_DIR\n",
                 argv[0]);
    return 2;
  }
  const auto key = transport::SigningKey::from_seed(kSeed).value();
  const std::vector<CorpusSeed> corpora[] = {checkpoint_seeds(), message_seeds(key), signed_record_seeds(key),
                                             decision_log_seeds()};
  constexpr int kCorpora = 4;
  int status = 0;
  for (int c = 0; c < kCorpora; ++c) {
    // write_or_check_corpus takes `[--check] DIR`: once per corpus.
    char* args[] = {argv[0], check ? argv[1] : argv[argc - kCorpora + c], argv[argc - kCorpora + c]};
    const int result = ballot::fuzzing::write_or_check_corpus(check ? 3 : 2, args, corpora[c]);
    if (result != 0) status = result;
  }
  return status;
}

#include "runtime/messages.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/byte_io.h"
#include "core/enforce.h"
#include "kernels/float_entries.h"

namespace ballot::runtime {
namespace {

constexpr char kJoinTag[4] = {'J', 'O', 'I', 'N'};
constexpr char kFinishTag[4] = {'D', 'O', 'N', 'E'};
constexpr char kEvidenceTag[4] = {'P', 'R', 'U', 'F'};
constexpr char kRequestTag[4] = {'D', 'R', 'E', 'Q'};

// The digest, the signs and the tagged control payloads over core/byte_io.h's reader and writer:
// the reader bounds every read, so a peer's count never sizes an allocation unchecked.
ByteWriter& put_digest(ByteWriter& writer, const transport::Digest& digest) { return writer.put_bytes(digest); }

ByteWriter& put_signs(ByteWriter& writer, const BitVector& signs) {
  writer.put<std::uint64_t>(signs.size());
  return writer.put_array(std::span<const std::uint64_t>(signs.words()));
}

ByteWriter& put_tag(ByteWriter& writer, const char (&tag)[4]) {
  return writer.put_bytes({reinterpret_cast<const std::uint8_t*>(tag), 4});
}

Status read_digest(ByteReader& reader, transport::Digest& digest) {
  BALLOT_ASSIGN_OR_RETURN(const auto bytes, reader.take_bytes(digest.size(), "model digest"));
  std::memcpy(digest.data(), bytes.data(), digest.size());
  return {};
}

// The head every vote shares (Vote, EncodedVote, VotePiece): round, loss, state digest.
template <typename Message>
Status read_vote_head(ByteReader& reader, Message& message) {
  BALLOT_ASSIGN_OR_RETURN(message.round, reader.read<std::uint64_t>("round"));
  BALLOT_ASSIGN_OR_RETURN(message.loss, reader.read<double>("loss"));
  return read_digest(reader, message.model_digest);
}

// The dimension must equal `dimension` before the words are read: no allocation sized by a peer.
Result<BitVector> read_signs(ByteReader& reader, std::size_t dimension) {
  BALLOT_ASSIGN_OR_RETURN(const auto size, reader.read<std::uint64_t>("dimension"));
  if (size != dimension) {
    return reader.malformed(std::to_string(size) + " coordinates, the model has " + std::to_string(dimension));
  }
  BALLOT_ASSIGN_OR_RETURN(const auto bytes,
                          reader.take(BitVector::words_for(dimension), sizeof(std::uint64_t), "signs"));
  return BitVector::from_bytes(dimension, bytes);
}

// A FloatDecision's two forms (messages.h): the form byte, and the sparse form's test. Absent
// coordinates of the sparse form are +0 (bits 0); -0, NaN and every other value are entries.
constexpr std::uint8_t kDenseForm = 0;
constexpr std::uint8_t kSparseForm = 1;
// What both decisions hold before their signs' words or form byte: round u64, η f32, λ f32, full
// digest u8, dimension u64.
constexpr std::size_t kDecisionHead = 8 + 4 + 4 + 1 + 8;

bool is_positive_zero(float value) { return std::bit_cast<std::uint32_t>(value) == 0; }

std::size_t sparse_entries(std::span<const float> direction) { return kernels::count_entries(direction); }

// The encoder's choice, which the decoder checks (one encoding per direction): sparse iff its
// body (count u64, then 8 bytes an entry) is smaller than the dense one (4 bytes a coordinate)
// and every index fits a u32.
bool sparse_is_smaller(std::size_t dimension, std::size_t entries) {
  return dimension <= (std::uint64_t{1} << 32) && 8 + 8 * std::uint64_t{entries} < 4 * std::uint64_t{dimension};
}

// The sparse form's body: count u64, the entries' indices (u32, rising), their values.
ByteWriter& put_sparse_body(ByteWriter& writer, std::span<const float> direction, std::size_t entries) {
  std::vector<std::uint32_t> indices;
  indices.reserve(entries);
  kernels::append_entries(direction, indices);
  std::vector<float> values;
  values.reserve(entries);
  for (const std::uint32_t i : indices) values.push_back(direction[i]);
  writer.put<std::uint64_t>(entries);
  return writer.put_array(std::span<const std::uint32_t>(indices)).put_array(std::span<const float>(values));
}

// The head every decision shares after its round: η, λ and the full-digest flag.
ByteWriter& put_step(ByteWriter& writer, const learning::StepScale& scale, bool full_digest) {
  return writer.put(scale.lr).put(scale.weight_decay).put<std::uint8_t>(full_digest ? 1 : 0);
}

bool usable_rate(float value) {
  return value >= 0.0f && value <= std::numeric_limits<float>::max() && !std::signbit(value);
}

// A scale the update could not use as a rate (negative, -0, NaN, infinite) or a flag byte other
// than 0 or 1 is malformed.
Status read_step(ByteReader& reader, learning::StepScale& scale, bool& full_digest) {
  BALLOT_ASSIGN_OR_RETURN(scale.lr, reader.read<float>("learning rate"));
  BALLOT_ASSIGN_OR_RETURN(scale.weight_decay, reader.read<float>("weight decay"));
  BALLOT_ASSIGN_OR_RETURN(const auto flag, reader.read<std::uint8_t>("full digest"));
  if (!usable_rate(scale.lr)) {
    return reader.malformed("learning rate " + std::to_string(scale.lr) + " is not finite and >= 0");
  }
  if (!usable_rate(scale.weight_decay)) {
    return reader.malformed("weight decay " + std::to_string(scale.weight_decay) + " is not finite and >= 0");
  }
  if (flag > 1) return reader.malformed("full digest flag " + std::to_string(flag) + " is not 0 or 1");
  full_digest = flag == 1;
  return {};
}

}  // namespace

std::vector<std::uint8_t> encode(const RoundStart& message) {
  ByteWriter writer;
  writer.put(message.round).put(message.deadline_ms);
  return put_digest(writer, message.model_digest).take();
}

std::vector<std::uint8_t> encode(const Vote& message) {
  ByteWriter writer;
  put_digest(writer.put(message.round).put(message.loss), message.model_digest);
  return put_signs(writer, message.signs).take();
}

std::vector<std::uint8_t> encode(const AuditedVote& message) {
  ByteWriter writer(encode(message.vote));
  writer.put(static_cast<std::uint32_t>(message.inputs.size()));
  for (const auto& envelope : message.inputs) writer.put_bytes(transport::encode_envelope(envelope));
  return writer.take();
}

std::vector<std::uint8_t> encode(const Decision& message) {
  ByteWriter writer;
  return put_signs(put_step(writer.put(message.round), message.scale, message.full_digest), message.signs).take();
}

std::vector<std::uint8_t> encode(const EncodedVote& message) {
  ByteWriter writer;
  put_digest(writer.put(message.round).put(message.loss), message.model_digest);
  return writer.put<std::uint64_t>(message.bytes.size()).put_bytes(message.bytes).take();
}

std::vector<std::uint8_t> encode(const FloatDecision& message) {
  ByteWriter writer;
  const std::span<const float> direction(message.direction);
  put_step(writer.put(message.round), message.scale, message.full_digest).put<std::uint64_t>(direction.size());
  const std::size_t entries = sparse_entries(direction);
  if (!sparse_is_smaller(direction.size(), entries)) {
    return writer.put<std::uint8_t>(kDenseForm).put_array(direction).take();
  }
  return put_sparse_body(writer.put<std::uint8_t>(kSparseForm), direction, entries).take();
}

transport::Digest direction_digest_of_decision(std::span<const std::uint8_t> float_decision) {
  BALLOT_ENFORCE_GE(float_decision.size(), kDecisionHead + 1);
  BALLOT_ENFORCE_LE(float_decision[kDecisionHead], kSparseForm);  // a FloatDecision's form byte
  return transport::payload_digest(float_decision.subspan(kDecisionHead + 1));
}

transport::Digest direction_digest(std::span<const float> direction) {
  const std::size_t entries = sparse_entries(direction);
  if (!sparse_is_smaller(direction.size(), entries)) {
    return transport::payload_digest({reinterpret_cast<const std::uint8_t*>(direction.data()), direction.size_bytes()});
  }
  ByteWriter body;
  return transport::payload_digest(put_sparse_body(body, direction, entries).bytes());
}

std::uint64_t piece_offset(std::uint64_t total, std::uint32_t index, std::uint32_t count) {
  // ⌊total · index / count⌋ without overflow: with total = q · count + r (r < count < 2^32 and
  // index ≤ count), it is q · index + ⌊r · index / count⌋, and r · index < 2^64.
  const std::uint64_t q = total / count, r = total % count;
  return q * index + r * index / count;
}

void FiniteLossMean::add(double loss) noexcept {
  if (!std::isfinite(loss)) return;
  sum_ += loss;
  ++count_;
}

double FiniteLossMean::value() const noexcept {
  return count_ == 0 ? std::numeric_limits<double>::quiet_NaN() : sum_ / static_cast<double>(count_);
}

std::uint64_t decision_bytes(std::size_t dimension, bool sign_vote) {
  // A FloatDecision's largest form is the dense one (the form byte, d floats).
  return kDecisionHead + (sign_vote ? 8 * BitVector::words_for(dimension) : 1 + 4 * std::uint64_t{dimension});
}

transport::FrameLimits round_frame_limits(std::size_t dimension, std::size_t codec_bytes, bool sign_vote,
                                          std::size_t nodes) {
  using transport::MessageType;
  transport::FrameLimits limits;
  const auto at_least = [&](MessageType type, std::uint64_t bytes) {
    limits.set_limit(type, std::max(limits.limit(type), bytes));
  };
  const std::uint64_t vote_head = 8 + 8 + 32 + 8;  // round, loss, state digest, dimension or length
  const std::uint64_t signs = vote_head + 8 * BitVector::words_for(dimension);
  const std::uint64_t audited = 4 + std::uint64_t{nodes} * transport::kEnvelopeMetaSize;
  at_least(MessageType::kVote, sign_vote ? signs + audited : vote_head + codec_bytes);
  at_least(MessageType::kPartitionSigns, signs);
  at_least(MessageType::kVotePiece, signs + 4 + 4);  // one piece: the whole vote, index and count
  const std::uint64_t decision = decision_bytes(dimension, sign_vote);
  at_least(MessageType::kDecision, decision);
  const std::uint64_t piece_head = 8 + 4 + 4 + 8;  // round, index, count, total
  at_least(MessageType::kDecisionPiece, transport::kEnvelopeMetaSize + piece_head + decision);
  return limits;
}

std::vector<DecisionPiece> cut_decision(std::uint64_t round, std::span<const std::uint8_t> payload,
                                        std::uint32_t count) {
  std::vector<DecisionPiece> pieces;
  for (std::uint32_t k = 0; k < count; ++k) {
    const auto piece =
        payload.subspan(piece_offset(payload.size(), k, count),
                        piece_offset(payload.size(), k + 1, count) - piece_offset(payload.size(), k, count));
    pieces.push_back(DecisionPiece{round, k, count, payload.size(), {piece.begin(), piece.end()}});
  }
  return pieces;
}

std::optional<std::vector<std::uint8_t>> DecisionAssembly::add(const DecisionPiece& piece) {
  if (count_ == 0) {
    count_ = piece.count;
    bytes_.assign(piece.total, 0);
    have_.assign(piece.count, false);
  }
  if (piece.count != count_ || piece.total != bytes_.size() || piece.index >= count_ || have_[piece.index]) {
    return std::nullopt;
  }
  std::copy(piece.bytes.begin(), piece.bytes.end(),
            bytes_.begin() + static_cast<std::ptrdiff_t>(piece_offset(piece.total, piece.index, piece.count)));
  have_[piece.index] = true;
  if (++held_ < count_) return std::nullopt;
  auto whole = std::move(bytes_);
  clear();
  return whole;
}

std::vector<std::uint8_t> encode(const DecisionPiece& message) {
  ByteWriter writer;
  writer.put(message.round).put(message.index).put(message.count).put(message.total);
  return writer.put_bytes(message.bytes).take();
}

std::size_t vote_piece_word(std::size_t words, std::uint32_t index, std::uint32_t count) {
  return static_cast<std::size_t>(piece_offset(words, index, count));
}

Status check_vote_piece(std::size_t words, std::uint32_t index, std::uint32_t count) {
  const std::size_t most = std::max<std::size_t>(1, words);
  if (count == 0 || count > most || index >= count) {
    return make_error(ErrorCode::kInvalidArgument, "vote piece " + std::to_string(index) + " of " +
                                                       std::to_string(count) + ": a vote of " + std::to_string(words) +
                                                       " words has 1 to " + std::to_string(most) +
                                                       " pieces (one word each at most)");
  }
  return {};
}

std::vector<std::uint8_t> encode(const VotePiece& message) {
  ByteWriter writer;
  put_digest(writer.put(message.round).put(message.loss), message.model_digest);
  writer.put(message.dimension).put(message.index).put(message.count);
  return writer.put_array(std::span<const std::uint64_t>(message.words)).take();
}

Result<std::optional<Vote>> VoteAssembly::add(const VotePiece& piece) {
  const std::size_t words = BitVector::words_for(piece.dimension);
  const std::size_t begin = vote_piece_word(words, piece.index, piece.count);
  if (held_ == 0) {
    head_ = VotePiece{piece.round, piece.loss, piece.model_digest, piece.dimension, 0, piece.count, {}};
    words_.assign(words, 0);
    have_.assign(piece.count, false);
  } else if (piece.round != head_.round || piece.count != head_.count || piece.dimension != head_.dimension ||
             piece.model_digest != head_.model_digest ||
             std::memcmp(&piece.loss, &head_.loss, sizeof piece.loss) != 0) {
    return make_error(ErrorCode::kMalformed, "vote piece " + std::to_string(piece.index) +
                                                 ": its head differs from the first piece's of this vote");
  }
  if (piece.index >= have_.size() || begin + piece.words.size() > words_.size()) {
    return make_error(ErrorCode::kMalformed, "vote piece " + std::to_string(piece.index) + " of " +
                                                 std::to_string(piece.count) + " does not fit the vote");
  }
  if (have_[piece.index]) {
    if (!std::equal(piece.words.begin(), piece.words.end(), words_.begin() + static_cast<std::ptrdiff_t>(begin)))
      return make_error(ErrorCode::kMalformed, "a second, different vote piece " + std::to_string(piece.index));
    return std::optional<Vote>{};
  }
  std::copy(piece.words.begin(), piece.words.end(), words_.begin() + static_cast<std::ptrdiff_t>(begin));
  have_[piece.index] = true;
  bytes_ += 8 + 8 + 32 + 8 + 4 + 4 + 8 * std::uint64_t{piece.words.size()};
  if (++held_ < have_.size()) return std::optional<Vote>{};
  auto signs = BitVector::from_words(static_cast<std::size_t>(head_.dimension), words_);
  if (!signs.ok()) return make_error(ErrorCode::kMalformed, "vote pieces: " + signs.error().message);
  return std::optional<Vote>{Vote{head_.round, head_.loss, head_.model_digest, std::move(*signs)}};
}

std::vector<std::uint8_t> encode(const RelayedPiece& message) {
  ByteWriter writer;
  return writer.put_bytes(transport::encode_envelope(message.envelope)).put_bytes(message.piece).take();
}

std::vector<std::uint8_t> encode(const DecisionRequest& message) {
  ByteWriter writer;
  return put_tag(writer, kRequestTag).put(message.round).take();
}

std::vector<std::uint8_t> encode(const Join& message) {
  ByteWriter writer;
  return put_digest(put_tag(writer, kJoinTag).put(message.round), message.state_digest).take();
}

std::vector<std::uint8_t> encode(const Finish& message) {
  ByteWriter writer;
  return put_tag(writer, kFinishTag).put(message.rounds).take();
}

std::vector<std::uint8_t> encode(const Evidence& message) {
  ByteWriter writer;
  return put_tag(writer, kEvidenceTag).put_bytes(message.proof.encode()).take();
}

Result<RoundStart> decode_round_start(std::span<const std::uint8_t> bytes) {
  ByteReader reader(bytes, "round start");
  RoundStart message;
  BALLOT_ASSIGN_OR_RETURN(message.round, reader.read<std::uint64_t>("round"));
  BALLOT_ASSIGN_OR_RETURN(message.deadline_ms, reader.read<std::uint32_t>("deadline"));
  BALLOT_TRY(read_digest(reader, message.model_digest));
  BALLOT_TRY(reader.expect_end());
  return message;
}

namespace {

// The Vote layout, shared by a vote, the partition signs and the head of an audited vote.
Status read_vote(ByteReader& reader, std::size_t dimension, Vote& message) {
  BALLOT_TRY(read_vote_head(reader, message));
  BALLOT_ASSIGN_OR_RETURN(message.signs, read_signs(reader, dimension));
  return {};
}

}  // namespace

Result<Vote> decode_vote(std::span<const std::uint8_t> bytes, std::size_t dimension) {
  ByteReader reader(bytes, "vote");
  Vote message;
  BALLOT_TRY(read_vote(reader, dimension, message));
  BALLOT_TRY(reader.expect_end());
  return message;
}

Result<AuditedVote> decode_audited_vote(std::span<const std::uint8_t> bytes, std::size_t dimension,
                                        std::size_t max_inputs) {
  ByteReader reader(bytes, "audited vote");
  AuditedVote message;
  BALLOT_TRY(read_vote(reader, dimension, message.vote));
  BALLOT_ASSIGN_OR_RETURN(const auto count, reader.read<std::uint32_t>("input count"));
  if (count > max_inputs) {
    return reader.malformed(std::to_string(count) + " inputs, at most " + std::to_string(max_inputs));
  }
  message.inputs.reserve(count);
  for (std::uint32_t k = 0; k < count; ++k) {
    BALLOT_ASSIGN_OR_RETURN(auto meta, reader.take_bytes(transport::kEnvelopeMetaSize, "input envelope"));
    auto envelope = transport::decode_envelope(meta);
    if (!envelope.ok()) return reader.malformed("input " + std::to_string(k) + ": " + envelope.error().message);
    if (envelope->header.type != transport::MessageType::kPartitionSigns) {
      return reader.malformed("input " + std::to_string(k) + " is not a partition-signs envelope");
    }
    if (!message.inputs.empty() && envelope->header.sender <= message.inputs.back().header.sender) {
      return reader.malformed("input authors are not strictly ascending");
    }
    message.inputs.push_back(*envelope);
  }
  BALLOT_TRY(reader.expect_end());
  return message;
}

Result<Decision> decode_decision(std::span<const std::uint8_t> bytes, std::size_t dimension) {
  ByteReader reader(bytes, "decision");
  Decision message;
  BALLOT_ASSIGN_OR_RETURN(message.round, reader.read<std::uint64_t>("round"));
  BALLOT_TRY(read_step(reader, message.scale, message.full_digest));
  BALLOT_ASSIGN_OR_RETURN(message.signs, read_signs(reader, dimension));
  BALLOT_TRY(reader.expect_end());
  return message;
}

Result<EncodedVote> decode_encoded_vote(std::span<const std::uint8_t> bytes, std::size_t max_bytes) {
  ByteReader reader(bytes, "vote");
  EncodedVote message;
  BALLOT_TRY(read_vote_head(reader, message));
  BALLOT_ASSIGN_OR_RETURN(const auto length, reader.read<std::uint64_t>("length"));
  if (length > max_bytes) {
    return make_error(ErrorCode::kLimitExceeded,
                      "vote: " + std::to_string(length) + " codec bytes, at most " + std::to_string(max_bytes));
  }
  BALLOT_ASSIGN_OR_RETURN(auto payload, reader.take_bytes(static_cast<std::size_t>(length), "codec bytes"));
  message.bytes.assign(payload.begin(), payload.end());
  BALLOT_TRY(reader.expect_end());
  return message;
}

Result<FloatDecision> decode_float_decision(std::span<const std::uint8_t> bytes, std::size_t dimension,
                                            std::optional<coding::SparseGradient>* listed, std::vector<float> storage) {
  ByteReader reader(bytes, "decision");
  if (listed != nullptr) listed->reset();
  FloatDecision message;
  message.direction = std::move(storage);
  BALLOT_ASSIGN_OR_RETURN(message.round, reader.read<std::uint64_t>("round"));
  BALLOT_TRY(read_step(reader, message.scale, message.full_digest));
  BALLOT_ASSIGN_OR_RETURN(const auto size, reader.read<std::uint64_t>("dimension"));
  if (size != dimension) {
    return reader.malformed(std::to_string(size) + " coordinates, the model has " + std::to_string(dimension));
  }
  BALLOT_ASSIGN_OR_RETURN(const auto form, reader.read<std::uint8_t>("form"));
  if (form == kDenseForm) {
    BALLOT_ASSIGN_OR_RETURN(const auto floats, reader.take(dimension, sizeof(float), "direction"));
    message.direction.resize(dimension);
    if (dimension != 0) std::memcpy(message.direction.data(), floats.data(), floats.size());
    if (sparse_is_smaller(dimension, sparse_entries(message.direction))) {
      return reader.malformed("a dense direction whose sparse form is smaller");
    }
    BALLOT_TRY(reader.expect_end());
    return message;
  }
  if (form != kSparseForm) return reader.malformed("form " + std::to_string(form) + ", not 0 (dense) or 1 (sparse)");
  BALLOT_ASSIGN_OR_RETURN(const auto entries, reader.read<std::uint64_t>("entries"));
  if (entries > dimension || !sparse_is_smaller(dimension, static_cast<std::size_t>(entries))) {
    return reader.malformed(std::to_string(entries) + " sparse entries of " + std::to_string(dimension) +
                            " coordinates, not fewer than the dense form holds");
  }
  const auto count = static_cast<std::size_t>(entries);
  BALLOT_ASSIGN_OR_RETURN(const auto indices, reader.take(count, sizeof(std::uint32_t), "indices"));
  BALLOT_ASSIGN_OR_RETURN(const auto values, reader.take(count, sizeof(float), "values"));
  BALLOT_TRY(reader.expect_end());
  message.direction.assign(dimension, 0.0f);
  coding::SparseGradient as_listed;  // for `listed`
  if (listed != nullptr) {
    as_listed.indices.reserve(count);
    as_listed.values.resize(count);
    if (count > 0) std::memcpy(as_listed.values.data(), values.data(), 4 * count);
  }
  std::uint64_t next = 0;  // the smallest index the next entry may have
  for (std::size_t k = 0; k < count; ++k) {
    std::uint32_t index = 0;
    float value = 0.0f;
    std::memcpy(&index, indices.data() + 4 * k, 4);
    std::memcpy(&value, values.data() + 4 * k, 4);
    if (index < next || index >= dimension) {
      return reader.malformed("sparse index " + std::to_string(index) + " at entry " + std::to_string(k) +
                              ": indices rise strictly below " + std::to_string(dimension));
    }
    if (is_positive_zero(value)) {
      return reader.malformed("sparse entry " + std::to_string(k) + " holds +0, which the sparse form leaves out");
    }
    message.direction[index] = value;
    if (listed != nullptr) as_listed.indices.push_back(index);
    next = std::uint64_t{index} + 1;
  }
  if (listed != nullptr) *listed = std::move(as_listed);
  return message;
}

Result<DecisionPiece> decode_decision_piece(std::span<const std::uint8_t> bytes, std::uint64_t max_total,
                                            std::size_t max_count) {
  ByteReader reader(bytes, "decision piece");
  DecisionPiece message;
  BALLOT_ASSIGN_OR_RETURN(message.round, reader.read<std::uint64_t>("round"));
  BALLOT_ASSIGN_OR_RETURN(message.index, reader.read<std::uint32_t>("index"));
  BALLOT_ASSIGN_OR_RETURN(message.count, reader.read<std::uint32_t>("count"));
  BALLOT_ASSIGN_OR_RETURN(message.total, reader.read<std::uint64_t>("total"));
  if (message.count == 0 || message.count > max_count) {
    return reader.malformed(std::to_string(message.count) + " pieces, at most " + std::to_string(max_count));
  }
  if (message.index >= message.count) {
    return reader.malformed("piece " + std::to_string(message.index) + " of " + std::to_string(message.count));
  }
  if (message.total > max_total) {
    return reader.malformed("a decision of " + std::to_string(message.total) + " bytes, the model's has at most " +
                            std::to_string(max_total));
  }
  const std::uint64_t total = message.total;
  const std::uint64_t length =
      piece_offset(total, message.index + 1, message.count) - piece_offset(total, message.index, message.count);
  if (reader.remaining() != length) {
    return reader.malformed(std::to_string(reader.remaining()) + " bytes in a piece of " + std::to_string(length));
  }
  const auto piece = reader.rest();
  message.bytes.assign(piece.begin(), piece.end());
  return message;
}

Result<VotePiece> decode_vote_piece(std::span<const std::uint8_t> bytes, std::size_t dimension) {
  ByteReader reader(bytes, "vote piece");
  VotePiece message;
  BALLOT_TRY(read_vote_head(reader, message));
  BALLOT_ASSIGN_OR_RETURN(message.dimension, reader.read<std::uint64_t>("dimension"));
  if (message.dimension != dimension) {
    return reader.malformed(std::to_string(message.dimension) + " coordinates, the model has " +
                            std::to_string(dimension));
  }
  BALLOT_ASSIGN_OR_RETURN(message.index, reader.read<std::uint32_t>("index"));
  BALLOT_ASSIGN_OR_RETURN(message.count, reader.read<std::uint32_t>("count"));
  const std::size_t words = BitVector::words_for(dimension);
  if (auto valid = check_vote_piece(words, message.index, message.count); !valid.ok()) {
    return reader.malformed(valid.error().message);
  }
  const std::size_t length =
      vote_piece_word(words, message.index + 1, message.count) - vote_piece_word(words, message.index, message.count);
  if (reader.remaining() != 8 * length) {
    return reader.malformed(std::to_string(reader.remaining()) + " bytes in a piece of " + std::to_string(length) +
                            " words");
  }
  BALLOT_ASSIGN_OR_RETURN(message.words, reader.read_array<std::uint64_t>(length, "words"));
  return message;
}

Result<RelayedPiece> decode_relayed_piece(std::span<const std::uint8_t> bytes) {
  ByteReader reader(bytes, "relayed piece");
  BALLOT_ASSIGN_OR_RETURN(const auto meta, reader.take_bytes(transport::kEnvelopeMetaSize, "envelope"));
  auto envelope = transport::decode_envelope(meta);
  if (!envelope.ok()) return reader.malformed("envelope: " + envelope.error().message);
  const auto piece = reader.rest();
  return RelayedPiece{*envelope, std::vector<std::uint8_t>(piece.begin(), piece.end())};
}

Result<Control> decode_control(std::span<const std::uint8_t> bytes) {
  ByteReader reader(bytes, "control message");
  BALLOT_ASSIGN_OR_RETURN(const auto tag, reader.take_bytes(4, "tag"));
  if (std::memcmp(tag.data(), kEvidenceTag, 4) == 0) {
    auto proof = transport::EquivocationProof::decode(reader.rest());
    if (!proof.ok()) return make_error(ErrorCode::kMalformed, "evidence: " + proof.error().message);
    return Control{Evidence{*proof}};
  }
  BALLOT_ASSIGN_OR_RETURN(const auto value, reader.read<std::uint64_t>("round"));
  if (std::memcmp(tag.data(), kJoinTag, 4) == 0) {
    Join join{value, {}};
    BALLOT_TRY(read_digest(reader, join.state_digest));
    BALLOT_TRY(reader.expect_end());
    return Control{join};
  }
  BALLOT_TRY(reader.expect_end());
  if (std::memcmp(tag.data(), kFinishTag, 4) == 0) return Control{Finish{value}};
  if (std::memcmp(tag.data(), kRequestTag, 4) == 0) return Control{DecisionRequest{value}};
  return reader.malformed("unknown tag");
}

}  // namespace ballot::runtime

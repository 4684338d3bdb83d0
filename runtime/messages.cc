#include "runtime/messages.h"

#include <cstring>
#include <string>

namespace ballot::runtime {
namespace {

constexpr char kJoinTag[4] = {'J', 'O', 'I', 'N'};
constexpr char kFinishTag[4] = {'D', 'O', 'N', 'E'};
constexpr char kEvidenceTag[4] = {'P', 'R', 'U', 'F'};

class Writer {
 public:
  template <typename T>
  Writer& put(T value) {
    for (std::size_t i = 0; i < sizeof(T); ++i) bytes_.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
    return *this;
  }
  Writer& put_f64(double value) {
    std::uint64_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    return put(bits);
  }
  Writer& put_bytes(std::span<const std::uint8_t> data) {
    bytes_.insert(bytes_.end(), data.begin(), data.end());
    return *this;
  }
  Writer& put_signs(const BitVector& signs) {
    put<std::uint64_t>(signs.size());
    for (auto word : signs.words()) put(word);
    return *this;
  }
  std::vector<std::uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<std::uint8_t> bytes_;
};

class Reader {
 public:
  Reader(std::span<const std::uint8_t> bytes, const char* what) : bytes_(bytes), what_(what) {}

  template <typename T>
  Status get(T& value, const char* field) {
    if (bytes_.size() - offset_ < sizeof(T)) return truncated(field);
    value = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) value |= static_cast<T>(static_cast<T>(bytes_[offset_ + i]) << (8 * i));
    offset_ += sizeof(T);
    return {};
  }
  Status get_f64(double& value, const char* field) {
    std::uint64_t bits = 0;
    BALLOT_TRY(get(bits, field));
    std::memcpy(&value, &bits, sizeof(value));
    return {};
  }
  Status get_digest(transport::Digest& digest) {
    if (bytes_.size() - offset_ < digest.size()) return truncated("model digest");
    std::memcpy(digest.data(), bytes_.data() + offset_, digest.size());
    offset_ += digest.size();
    return {};
  }
  // The dimension must equal `dimension` before the words are read: no allocation sized by a peer.
  Result<BitVector> get_signs(std::size_t dimension) {
    std::uint64_t size = 0;
    BALLOT_TRY(get(size, "dimension"));
    if (size != dimension) {
      return make_error(ErrorCode::kMalformed, std::string(what_) + ": " + std::to_string(size) +
                                                   " coordinates, the model has " + std::to_string(dimension));
    }
    const std::size_t words = BitVector::words_for(dimension);
    if ((bytes_.size() - offset_) / 8 < words) return truncated("signs");
    std::vector<std::uint64_t> raw(words);
    for (auto& word : raw) BALLOT_TRY(get(word, "signs"));
    return BitVector::from_words(dimension, raw);
  }
  Result<std::span<const std::uint8_t>> get_raw(std::size_t count, const char* field) {
    if (bytes_.size() - offset_ < count) return truncated(field);
    const auto out = bytes_.subspan(offset_, count);
    offset_ += count;
    return out;
  }
  Status finish() const {
    if (offset_ != bytes_.size()) {
      return make_error(ErrorCode::kMalformed, std::string(what_) + ": " + std::to_string(bytes_.size() - offset_) +
                                                   " trailing bytes");
    }
    return {};
  }

 private:
  Error truncated(const char* field) const {
    return make_error(ErrorCode::kMalformed, std::string(what_) + ": truncated at " + field);
  }
  std::span<const std::uint8_t> bytes_;
  std::size_t offset_ = 0;
  const char* what_;
};

}  // namespace

std::vector<std::uint8_t> encode(const RoundStart& message) {
  return Writer().put(message.round).put(message.deadline_ms).put_bytes(message.model_digest).take();
}

std::vector<std::uint8_t> encode(const Vote& message) {
  return Writer().put(message.round).put_f64(message.loss).put_bytes(message.model_digest).put_signs(message.signs).take();
}

std::vector<std::uint8_t> encode(const AuditedVote& message) {
  Writer writer;
  writer.put(message.vote.round).put_f64(message.vote.loss).put_bytes(message.vote.model_digest).put_signs(message.vote.signs);
  writer.put(static_cast<std::uint32_t>(message.inputs.size()));
  for (const auto& envelope : message.inputs) writer.put_bytes(transport::encode_envelope(envelope));
  return writer.take();
}

std::vector<std::uint8_t> encode(const Decision& message) {
  return Writer().put(message.round).put_signs(message.signs).take();
}

std::vector<std::uint8_t> encode(const EncodedVote& message) {
  return Writer()
      .put(message.round)
      .put_f64(message.loss)
      .put_bytes(message.model_digest)
      .put<std::uint64_t>(message.bytes.size())
      .put_bytes(message.bytes)
      .take();
}

std::vector<std::uint8_t> encode(const FloatDecision& message) {
  Writer writer;
  writer.put(message.round).put<std::uint64_t>(message.direction.size());
  for (float value : message.direction) {
    std::uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    writer.put(bits);
  }
  return writer.take();
}

std::vector<std::uint8_t> encode(const Join& message) {
  return Writer().put_bytes({reinterpret_cast<const std::uint8_t*>(kJoinTag), 4}).put(message.round).take();
}

std::vector<std::uint8_t> encode(const Finish& message) {
  return Writer().put_bytes({reinterpret_cast<const std::uint8_t*>(kFinishTag), 4}).put(message.rounds).take();
}

std::vector<std::uint8_t> encode(const Evidence& message) {
  return Writer().put_bytes({reinterpret_cast<const std::uint8_t*>(kEvidenceTag), 4}).put_bytes(message.proof.encode()).take();
}

Result<RoundStart> decode_round_start(std::span<const std::uint8_t> bytes) {
  Reader reader(bytes, "round start");
  RoundStart message;
  BALLOT_TRY(reader.get(message.round, "round"));
  BALLOT_TRY(reader.get(message.deadline_ms, "deadline"));
  BALLOT_TRY(reader.get_digest(message.model_digest));
  BALLOT_TRY(reader.finish());
  return message;
}

Result<Vote> decode_vote(std::span<const std::uint8_t> bytes, std::size_t dimension) {
  Reader reader(bytes, "vote");
  Vote message;
  BALLOT_TRY(reader.get(message.round, "round"));
  BALLOT_TRY(reader.get_f64(message.loss, "loss"));
  BALLOT_TRY(reader.get_digest(message.model_digest));
  BALLOT_ASSIGN_OR_RETURN(message.signs, reader.get_signs(dimension));
  BALLOT_TRY(reader.finish());
  return message;
}

Result<AuditedVote> decode_audited_vote(std::span<const std::uint8_t> bytes, std::size_t dimension,
                                        std::size_t max_inputs) {
  Reader reader(bytes, "audited vote");
  AuditedVote message;
  BALLOT_TRY(reader.get(message.vote.round, "round"));
  BALLOT_TRY(reader.get_f64(message.vote.loss, "loss"));
  BALLOT_TRY(reader.get_digest(message.vote.model_digest));
  BALLOT_ASSIGN_OR_RETURN(message.vote.signs, reader.get_signs(dimension));
  std::uint32_t count = 0;
  BALLOT_TRY(reader.get(count, "input count"));
  if (count > max_inputs) {
    return make_error(ErrorCode::kMalformed, "audited vote: " + std::to_string(count) + " inputs, at most " +
                                                 std::to_string(max_inputs));
  }
  message.inputs.reserve(count);
  for (std::uint32_t k = 0; k < count; ++k) {
    BALLOT_ASSIGN_OR_RETURN(auto meta, reader.get_raw(transport::kEnvelopeMetaSize, "input envelope"));
    auto envelope = transport::decode_envelope(meta);
    if (!envelope.ok()) return make_error(ErrorCode::kMalformed, "audited vote: input " + std::to_string(k) + ": " + envelope.error().message);
    if (envelope->header.type != transport::MessageType::kGradient) {
      return make_error(ErrorCode::kMalformed, "audited vote: input " + std::to_string(k) + " is not a gradient envelope");
    }
    if (!message.inputs.empty() && envelope->header.sender <= message.inputs.back().header.sender) {
      return make_error(ErrorCode::kMalformed, "audited vote: input authors are not strictly ascending");
    }
    message.inputs.push_back(*envelope);
  }
  BALLOT_TRY(reader.finish());
  return message;
}

Result<Decision> decode_decision(std::span<const std::uint8_t> bytes, std::size_t dimension) {
  Reader reader(bytes, "decision");
  Decision message;
  BALLOT_TRY(reader.get(message.round, "round"));
  BALLOT_ASSIGN_OR_RETURN(message.signs, reader.get_signs(dimension));
  BALLOT_TRY(reader.finish());
  return message;
}

Result<EncodedVote> decode_encoded_vote(std::span<const std::uint8_t> bytes, std::size_t max_bytes) {
  Reader reader(bytes, "vote");
  EncodedVote message;
  BALLOT_TRY(reader.get(message.round, "round"));
  BALLOT_TRY(reader.get_f64(message.loss, "loss"));
  BALLOT_TRY(reader.get_digest(message.model_digest));
  std::uint64_t length = 0;
  BALLOT_TRY(reader.get(length, "length"));
  if (length > max_bytes) {
    return make_error(ErrorCode::kLimitExceeded, "vote: " + std::to_string(length) +
                                                     " codec bytes, at most " + std::to_string(max_bytes));
  }
  BALLOT_ASSIGN_OR_RETURN(auto payload, reader.get_raw(static_cast<std::size_t>(length), "codec bytes"));
  message.bytes.assign(payload.begin(), payload.end());
  BALLOT_TRY(reader.finish());
  return message;
}

Result<FloatDecision> decode_float_decision(std::span<const std::uint8_t> bytes, std::size_t dimension) {
  Reader reader(bytes, "decision");
  FloatDecision message;
  BALLOT_TRY(reader.get(message.round, "round"));
  std::uint64_t size = 0;
  BALLOT_TRY(reader.get(size, "dimension"));
  if (size != dimension) {
    return make_error(ErrorCode::kMalformed, "decision: " + std::to_string(size) + " coordinates, the model has " +
                                                 std::to_string(dimension));
  }
  BALLOT_ASSIGN_OR_RETURN(auto raw, reader.get_raw(dimension * sizeof(float), "direction"));
  message.direction.resize(dimension);
  std::memcpy(message.direction.data(), raw.data(), raw.size());  // little-endian hosts (x86, ARM)
  BALLOT_TRY(reader.finish());
  return message;
}

Result<Control> decode_control(std::span<const std::uint8_t> bytes) {
  if (bytes.size() < 4) return make_error(ErrorCode::kMalformed, "control message: truncated tag");
  if (std::memcmp(bytes.data(), kEvidenceTag, 4) == 0) {
    auto proof = transport::EquivocationProof::decode(bytes.subspan(4));
    if (!proof.ok()) return make_error(ErrorCode::kMalformed, "evidence: " + proof.error().message);
    return Control{Evidence{*proof}};
  }
  Reader reader(bytes.subspan(4), "control message");
  std::uint64_t value = 0;
  BALLOT_TRY(reader.get(value, "round"));
  BALLOT_TRY(reader.finish());
  if (std::memcmp(bytes.data(), kJoinTag, 4) == 0) return Control{Join{value}};
  if (std::memcmp(bytes.data(), kFinishTag, 4) == 0) return Control{Finish{value}};
  return make_error(ErrorCode::kMalformed, "control message: unknown tag");
}

}  // namespace ballot::runtime

#include "coding/wire_format.h"

#include "core/enforce.h"

namespace ballot::coding {

std::uint32_t layout_digest(const GradientLayout& layout) noexcept {
  // FNV-1a over the 8-byte little-endian sizes: cheap, and enough to catch a peer that encoded
  // for a different split of the same d (names are not part of the wire contract).
  std::uint32_t hash = 2166136261u;
  for (const auto& segment : layout.layers()) {
    std::uint64_t size = segment.size;
    for (int b = 0; b < 8; ++b) {
      hash ^= static_cast<std::uint8_t>(size >> (8 * b));
      hash *= 16777619u;
    }
  }
  return hash;
}

void write_header(std::vector<std::uint8_t>& out, CodecId codec, Granularity granularity, std::uint8_t flags,
                  const GradientLayout& layout, std::size_t payload_reserve) {
  BALLOT_ENFORCE_LE(layout.num_layers(), std::size_t{UINT32_MAX});
  out.clear();
  out.reserve(kHeaderBytes + payload_reserve);
  out.push_back('B');
  out.push_back('G');
  out.push_back(kWireVersion);
  out.push_back(static_cast<std::uint8_t>(codec));
  out.push_back(static_cast<std::uint8_t>(granularity));
  out.push_back(flags);
  out.push_back(0);
  out.push_back(0);
  append_pod<std::uint64_t>(out, layout.total_size());
  append_pod<std::uint32_t>(out, static_cast<std::uint32_t>(layout.num_layers()));
  append_pod<std::uint32_t>(out, layout_digest(layout));
}

Error malformed(const std::string& message) { return make_error(ErrorCode::kMalformed, message); }

Result<WireHeader> read_header(std::span<const std::uint8_t> bytes, CodecId expected, std::uint8_t allowed_flags,
                               const GradientLayout& layout) {
  if (bytes.size() < kHeaderBytes) {
    return malformed("encoded gradient of " + std::to_string(bytes.size()) + " bytes is shorter than the " +
                     std::to_string(kHeaderBytes) + "-byte header");
  }
  if (bytes[0] != 'B' || bytes[1] != 'G') return malformed("bad magic in encoded gradient");
  if (bytes[2] != kWireVersion) {
    return malformed("unsupported encoded-gradient version " + std::to_string(bytes[2]));
  }
  WireHeader header;
  header.codec = static_cast<CodecId>(bytes[3]);
  if (header.codec != expected) {
    return malformed(std::string("encoded gradient is codec id ") + std::to_string(bytes[3]) + ", expected " +
                     codec_id_name(expected));
  }
  if (bytes[4] > 1) return malformed("bad granularity " + std::to_string(bytes[4]));
  header.granularity = static_cast<Granularity>(bytes[4]);
  header.flags = bytes[5];
  if ((header.flags & ~allowed_flags) != 0) {
    return malformed("unknown flags " + std::to_string(header.flags) + " for " + codec_id_name(expected));
  }
  if (bytes[6] != 0 || bytes[7] != 0) return malformed("reserved header bytes are not zero");
  header.d = load_pod<std::uint64_t>(bytes.data() + 8);
  header.num_layers = load_pod<std::uint32_t>(bytes.data() + 16);
  header.layout_digest = load_pod<std::uint32_t>(bytes.data() + 20);
  if (header.d != layout.total_size()) {
    return malformed("encoded gradient has d = " + std::to_string(header.d) + ", layout has " +
                     std::to_string(layout.total_size()));
  }
  if (header.num_layers != layout.num_layers() || header.layout_digest != layout_digest(layout)) {
    return malformed("encoded gradient was made for a different layout (" + std::to_string(header.num_layers) +
                     " layers)");
  }
  return header;
}

std::vector<Segment> segments_of(const GradientLayout& layout, Granularity granularity) {
  std::vector<Segment> segments;
  if (granularity == Granularity::kModel) {
    segments.push_back({0, layout.total_size()});
  } else {
    segments.reserve(layout.num_layers());
    for (const auto& layer : layout.layers()) segments.push_back({layer.offset, layer.size});
  }
  return segments;
}

std::vector<std::uint8_t> write_state(CodecId codec, std::span<const float> memory,
                                      std::span<const std::uint8_t> inner) {
  std::vector<std::uint8_t> out{'B', 'S', kWireVersion, static_cast<std::uint8_t>(codec), 0, 0, 0, 0};
  append_pod<std::uint64_t>(out, memory.size());
  append_pod<std::uint64_t>(out, inner.size());
  append_pods(out, inner);
  append_pods(out, memory);
  return out;
}

Result<StateView> read_state(std::span<const std::uint8_t> bytes, CodecId codec, const GradientLayout& layout) {
  ByteReader reader(bytes, "codec state");
  BALLOT_ASSIGN_OR_RETURN(const auto magic, reader.take(8, 1, "state header"));
  if (magic[0] != 'B' || magic[1] != 'S' || magic[2] != kWireVersion) {
    return malformed("bad codec state magic or version");
  }
  if (magic[3] != static_cast<std::uint8_t>(codec)) {
    return malformed(std::string("codec state is for codec id ") + std::to_string(magic[3]) + ", expected " +
                     codec_id_name(codec));
  }
  if (magic[4] != 0 || magic[5] != 0 || magic[6] != 0 || magic[7] != 0) {
    return malformed("reserved codec state bytes are not zero");
  }
  BALLOT_ASSIGN_OR_RETURN(const auto d, reader.read<std::uint64_t>("state size"));
  BALLOT_ASSIGN_OR_RETURN(const auto inner_size, reader.read<std::uint64_t>("inner state size"));
  if (d != 0 && d != layout.total_size()) {
    return malformed("codec state has d = " + std::to_string(d) + ", layout has " +
                     std::to_string(layout.total_size()));
  }
  StateView view;
  BALLOT_ASSIGN_OR_RETURN(view.inner, reader.take(inner_size, 1, "inner state"));
  BALLOT_ASSIGN_OR_RETURN(const auto floats, reader.take(d, 4, "state memory"));
  BALLOT_TRY(reader.expect_end());
  view.memory.resize(d);
  if (d != 0) std::memcpy(view.memory.data(), floats.data(), floats.size());
  return view;
}

}  // namespace ballot::coding

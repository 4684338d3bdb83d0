// Fuzz target: every codec's decoder (and state loader) on hostile bytes. Input format in
// tests/coding/codec_fuzz_support.h. Whatever the bytes, decoding must return a Result — never
// crash, never read or write out of bounds — and a rejected message must leave the accumulator
// untouched; an accepted one must decode to exactly what decode_add adds, and decode_entries()
// must accept exactly what decode() accepts and list exactly its vector.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "../coding/codec_fuzz_support.h"
#include "coding/global_topk.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ballot::coding;
  if (size < 1) return 0;
  const std::uint8_t selector = data[0];
  const std::span<const std::uint8_t> bytes(data + 1, size - 1);
  const auto layout = fuzz::layout_for(selector);
  const bool state = (selector & fuzz::kStateBit) != 0;
  // The codec id sits at byte 3 of both the gradient header and the state blob.
  const std::uint8_t id = bytes.size() > 3 ? bytes[3] : 0;
  auto codec = fuzz::decoder_for(id, state);
  if (!codec) return 0;
  if (state) {
    const auto before = codec->save_state();
    if (!codec->load_state(bytes, layout).ok() && codec->save_state() != before) std::abort();
    return 0;
  }
  std::vector<float> acc(layout.total_size(), 0.5f);
  const auto status = codec->decode_add(bytes, layout, acc, 2.0f);
  if (!status.ok()) {
    for (float v : acc) {
      if (v != 0.5f) std::abort();  // untouched
    }
    if (codec->decode_entries(bytes, layout).ok()) std::abort();
    return 0;
  }
  const auto decoded = codec->decode(bytes, layout);
  if (!decoded.ok() || decoded->size() != acc.size()) std::abort();
  const auto entries = codec->decode_entries(bytes, layout);
  if (!entries.ok() || entries->indices.size() != entries->values.size()) std::abort();
  std::vector<float> written(decoded->size(), 0.0f);
  for (std::size_t j = 0; j < entries->indices.size(); ++j) {
    if (entries->indices[j] >= written.size() || (j > 0 && entries->indices[j] <= entries->indices[j - 1]))
      std::abort();
    written[entries->indices[j]] = entries->values[j];
  }
  if (!written.empty() && std::memcmp(written.data(), decoded->data(), written.size() * sizeof(float)) != 0) {
    std::abort();  // bit for bit; an empty vector's data may be null, which memcmp must not get
  }
  if (auto* gtopk = dynamic_cast<GlobalTopKCodec*>(codec.get())) (void)gtopk->accept_global(bytes, layout);
  return 0;
}

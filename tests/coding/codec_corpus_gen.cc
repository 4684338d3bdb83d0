// Writes the seed corpus of the codec_decode fuzz target: small valid encodings of every codec
// (both granularities, Elias and fixed QSGD, the global top-k down message) and valid state
// blobs of the stateful ones and of every codec's error feedback. Deterministic (fixed seeds),
// so `--check DIR` verifies that the committed corpus is what this program produces.
//   codec_corpus_gen DIR          write the files
//   codec_corpus_gen --check DIR  exit 1 if any file is missing or different
#include <algorithm>
#include <string>
#include <vector>

#include "codec_fuzz_support.h"
#include "coding/global_topk.h"
#include "core/rng.h"
#include "tests/fuzz/corpus_seeds.h"

namespace {

using namespace ballot;
using namespace ballot::coding;

using Seed = ballot::fuzzing::CorpusSeed;

std::vector<float> values(std::size_t d, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> out(d);
  for (auto& v : out) v = static_cast<float>(rng.normal());
  return out;
}

std::vector<Seed> seeds() {
  std::vector<Seed> out;
  std::vector<std::string> specs = {"fp32",
                                    "fp16",
                                    "bf16",
                                    "sign",
                                    "scaled_sign",
                                    "scaled_sign:granularity=model",
                                    "signum",
                                    "onebit",
                                    "topk:ratio=0.05",
                                    "topk:k=9,granularity=layer",
                                    "randomk:ratio=0.05",
                                    "randomk:k=9,granularity=layer",
                                    "gtopk:ratio=0.05",
                                    "threshold:tau=1.5",
                                    "qsgd:s=16",
                                    "qsgd:s=5,granularity=layer",
                                    "qsgd:s=4,elias=1",
                                    "qsgd:s=3,elias=1,granularity=layer",
                                    "terngrad",
                                    "terngrad:clip=2.5,granularity=model",
                                    "dgc:ratio=0.05",
                                    "dgc:ratio=0.1,clip=1,warmup=3,granularity=model"};
  // Every codec of the table has seeds: one with none above gets its example's (and the corpus
  // check then asks for the corpus to be regenerated).
  for (const CodecEntry& entry : codec_table()) {
    const bool covered = std::any_of(specs.begin(), specs.end(), [&entry](const std::string& spec) {
      return Spec::parse(spec).value().name() == entry.name;
    });
    if (!covered) specs.emplace_back(entry.example);
  }
  for (std::uint8_t selector : {std::uint8_t{1}, std::uint8_t{2}}) {
    const auto layout = fuzz::layout_for(selector);
    for (const std::string& spec : specs) {
      auto codec = make_codec(spec).value();
      Rng rng(7, selector);
      const auto g = values(layout.total_size(), 11);
      // Two steps so that stateful codecs have state to save.
      (void)codec->encode(values(layout.total_size(), 10), layout, rng);
      const auto encoded = codec->encode(g, layout, rng);
      Seed seed{spec + "-" + std::to_string(selector), {selector}};
      seed.bytes.insert(seed.bytes.end(), encoded.bytes.begin(), encoded.bytes.end());
      out.push_back(seed);
      if (codec->stateful()) {
        Seed state{spec + "-state-" + std::to_string(selector),
                   {static_cast<std::uint8_t>(selector | fuzz::kStateBit)}};
        const auto blob = codec->save_state();
        state.bytes.insert(state.bytes.end(), blob.begin(), blob.end());
        out.push_back(state);
      }
      if (spec == "gtopk:ratio=0.05") {
        const std::vector<std::span<const std::uint8_t>> messages{encoded.bytes};
        const auto global = global_topk_reduce(messages, layout, {.budget = {.ratio = 0.05}}).value();
        Seed down{"gtopk-global-" + std::to_string(selector), {selector}};
        down.bytes.insert(down.bytes.end(), global.bytes.begin(), global.bytes.end());
        out.push_back(down);
      }
    }
  }
  // The error-feedback state of every codec that is stateless by default (the fuzz target's
  // decoder_for(id, state=true)): the residual after two steps.
  // (The unbiased codecs, randomk, qsgd and terngrad, refuse ef=1.)
  const char* feedback[] = {"fp32:ef=1",        "fp16:ef=1", "bf16:ef=1",           "sign:ef=1",
                            "scaled_sign:ef=1", "topk:ef=1", "threshold:tau=1,ef=1"};
  for (std::uint8_t selector : {std::uint8_t{1}, std::uint8_t{2}}) {
    const auto layout = fuzz::layout_for(selector);
    for (const char* spec : feedback) {
      auto codec = make_codec(spec).value();
      Rng rng(7, selector);
      (void)codec->encode(values(layout.total_size(), 10), layout, rng);
      (void)codec->encode(values(layout.total_size(), 11), layout, rng);
      Seed state{std::string(spec) + "-state-" + std::to_string(selector),
                 {static_cast<std::uint8_t>(selector | fuzz::kStateBit)}};
      const auto blob = codec->save_state();
      state.bytes.insert(state.bytes.end(), blob.begin(), blob.end());
      out.push_back(state);
    }
  }
  for (auto& seed : out) {
    for (char& c : seed.file_name) {
      if (c == ':' || c == ',' || c == '=') c = '_';
    }
    seed.file_name += ".bin";
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) { return ballot::fuzzing::write_or_check_corpus(argc, argv, seeds()); }

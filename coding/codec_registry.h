// Codecs by name with options, in the ballot::Spec syntax ("name:key=value,...").
//
//   fp32 | fp16 | bf16
//   sign
//   scaled_sign[:granularity=model|layer]                         (default layer)
//   signum[:beta=0.9]
//   onebit[:granularity=..]                                       (error feedback on by default)
//   topk | randomk | gtopk [:k=N | :ratio=R][,granularity=..]     (default ratio=0.01, model)
//   threshold:tau=T
//   qsgd[:s=16][,elias=0|1][,granularity=..]                      (default model)
//   terngrad[:clip=0][,granularity=..]                            (default layer)
//   dgc[:ratio=0.001][,momentum=0.9][,clip=0][,warmup=0][,warmup_start=0.25][,sample=0.01]
//      [,granularity=..]                                          (default layer; coding/dgc.h)
// Every codec also takes ef=0|1 (wrap in ErrorFeedback); only onebit defaults to 1; gtopk and dgc
// refuse ef=1 (they keep their own residual).
// The codecs are the lines of codec_table() (core/registry.h: name, keys, example, summary,
// factory, properties); docs/codecs.md documents each, and a test checks that it lists every name.
// Unknown names and options, and out-of-range values, are kInvalidArgument errors naming them.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "coding/codec.h"
#include "core/registry.h"
#include "core/result.h"
#include "core/spec.h"

namespace ballot::coding {

Result<std::unique_ptr<Codec>> make_codec(const Spec& spec);
Result<std::unique_ptr<Codec>> make_codec(std::string_view spec);

// What the registry needs to know of a codec besides its factory.
struct CodecProperties {
  CodecId id{};                 // its wire id (byte 3 of the header, docs/codecs.md)
  bool error_feedback = false;  // ef defaults to 1 (onebit)
  bool own_residual = false;    // keeps its own residual, so refuses ef=1 (gtopk, dgc)
  // Unbiased but not contractive (E C(x) = x with E‖C(x) − x‖² possibly above ‖x‖²: randomk,
  // qsgd, terngrad), so refuses ef=1: error feedback over it diverges, its memory growing each round.
  bool unbiased = false;
};
// A factory gets a Spec whose keys are already checked against the entry's `keys` (and ef); the
// registry wraps what it returns in ErrorFeedback when ef=1.
using CodecFactory = Result<std::unique_ptr<Codec>> (*)(const Spec&);
using CodecEntry = TableEntry<CodecFactory, CodecProperties>;
std::span<const CodecEntry> codec_table();

// The registered names, in table order.
std::vector<std::string> codec_names();
// The entry with that wire id, or null.
const CodecEntry* find_codec(CodecId id) noexcept;

}  // namespace ballot::coding

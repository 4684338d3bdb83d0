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
// Unknown names and options, and out-of-range values, are kInvalidArgument errors naming them.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "coding/codec.h"
#include "core/result.h"
#include "core/spec.h"

namespace ballot::coding {

Result<std::unique_ptr<Codec>> make_codec(const Spec& spec);
Result<std::unique_ptr<Codec>> make_codec(std::string_view spec);

// The registered names, in the order above.
std::vector<std::string> codec_names();

}  // namespace ballot::coding

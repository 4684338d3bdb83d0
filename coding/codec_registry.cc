#include "coding/codec_registry.h"

#include <cmath>

#include "coding/cast_codecs.h"
#include "coding/dgc.h"
#include "coding/error_feedback.h"
#include "coding/global_topk.h"
#include "coding/quantizers.h"
#include "coding/sign_codecs.h"
#include "coding/sparse_codecs.h"

namespace ballot::coding {
namespace {

Error invalid(const Spec& spec, const std::string& why) {
  return make_error(ErrorCode::kInvalidArgument, "codec '" + spec.to_string() + "': " + why);
}

Result<Granularity> granularity_option(const Spec& spec, Granularity fallback) {
  const std::string value = spec.get_string("granularity", granularity_name(fallback));
  if (value == "model") return Granularity::kModel;
  if (value == "layer") return Granularity::kLayer;
  return invalid(spec, "granularity must be 'model' or 'layer', not '" + value + "'");
}

Result<SparseOptions> sparse_options(const Spec& spec) {
  SparseOptions options;
  BALLOT_ASSIGN_OR_RETURN(const std::int64_t k, spec.get_int("k", 0));
  BALLOT_ASSIGN_OR_RETURN(options.ratio, spec.get_double("ratio", 0.01));
  BALLOT_ASSIGN_OR_RETURN(options.granularity, granularity_option(spec, Granularity::kModel));
  if (spec.has("k") && spec.has("ratio")) return invalid(spec, "give k or ratio, not both");
  if (k < 0 || (spec.has("k") && k == 0)) return invalid(spec, "k must be positive");
  if (!(options.ratio > 0.0 && options.ratio <= 1.0)) return invalid(spec, "ratio must be in (0, 1]");
  options.k = static_cast<std::size_t>(k);
  return options;
}

Result<std::unique_ptr<Codec>> make_inner(const Spec& spec) {
  const std::string& name = spec.name();
  if (name == "fp32" || name == "fp16" || name == "bf16") {
    BALLOT_TRY(spec.check_known({"ef"}));
    const FloatFormat format = name == "fp32" ? FloatFormat::kFp32
                               : name == "fp16" ? FloatFormat::kFp16 : FloatFormat::kBf16;
    return std::unique_ptr<Codec>(std::make_unique<CastCodec>(format));
  }
  if (name == "sign") {
    BALLOT_TRY(spec.check_known({"ef"}));
    return std::unique_ptr<Codec>(std::make_unique<SignCodec>(SignKind::kSign, Granularity::kModel));
  }
  if (name == "scaled_sign" || name == "onebit") {
    BALLOT_TRY(spec.check_known({"ef", "granularity"}));
    BALLOT_ASSIGN_OR_RETURN(const Granularity granularity, granularity_option(spec, Granularity::kLayer));
    const SignKind kind = name == "onebit" ? SignKind::kOneBit : SignKind::kScaledSign;
    return std::unique_ptr<Codec>(std::make_unique<SignCodec>(kind, granularity));
  }
  if (name == "signum") {
    BALLOT_TRY(spec.check_known({"ef", "beta"}));
    BALLOT_ASSIGN_OR_RETURN(const double beta, spec.get_double("beta", 0.9));
    if (!(beta >= 0.0 && beta < 1.0)) return invalid(spec, "beta must be in [0, 1)");
    return std::unique_ptr<Codec>(std::make_unique<SignumCodec>(SignumOptions{beta}));
  }
  if (name == "topk" || name == "randomk" || name == "gtopk") {
    BALLOT_TRY(spec.check_known({"ef", "k", "ratio", "granularity"}));
    BALLOT_ASSIGN_OR_RETURN(const SparseOptions options, sparse_options(spec));
    if (name == "topk") return std::unique_ptr<Codec>(std::make_unique<TopKCodec>(options));
    if (name == "randomk") return std::unique_ptr<Codec>(std::make_unique<RandomKCodec>(options));
    return std::unique_ptr<Codec>(std::make_unique<GlobalTopKCodec>(options));
  }
  if (name == "threshold") {
    BALLOT_TRY(spec.check_known({"ef", "tau"}));
    if (!spec.has("tau")) return invalid(spec, "threshold needs tau");
    BALLOT_ASSIGN_OR_RETURN(const double tau, spec.get_double("tau", 0.0));
    if (!(tau >= 0.0 && std::isfinite(tau))) return invalid(spec, "tau must be finite and >= 0");
    return std::unique_ptr<Codec>(std::make_unique<ThresholdCodec>(ThresholdOptions{static_cast<float>(tau)}));
  }
  if (name == "qsgd") {
    BALLOT_TRY(spec.check_known({"ef", "s", "elias", "granularity"}));
    QsgdOptions options;
    BALLOT_ASSIGN_OR_RETURN(const std::int64_t s, spec.get_int("s", 16));
    if (s < 1 || s > QsgdCodec::kMaxLevels) return invalid(spec, "s must be in [1, 65535]");
    options.s = static_cast<std::uint32_t>(s);
    BALLOT_ASSIGN_OR_RETURN(options.elias, spec.get_bool("elias", false));
    BALLOT_ASSIGN_OR_RETURN(options.granularity, granularity_option(spec, Granularity::kModel));
    return std::unique_ptr<Codec>(std::make_unique<QsgdCodec>(options));
  }
  if (name == "terngrad") {
    BALLOT_TRY(spec.check_known({"ef", "clip", "granularity"}));
    TernGradOptions options;
    BALLOT_ASSIGN_OR_RETURN(const double clip, spec.get_double("clip", 0.0));
    if (!(clip >= 0.0 && std::isfinite(clip))) return invalid(spec, "clip must be finite and >= 0");
    options.clip = static_cast<float>(clip);
    BALLOT_ASSIGN_OR_RETURN(options.granularity, granularity_option(spec, Granularity::kLayer));
    return std::unique_ptr<Codec>(std::make_unique<TernGradCodec>(options));
  }
  if (name == "dgc") {
    BALLOT_TRY(spec.check_known({"ef", "ratio", "momentum", "clip", "warmup", "warmup_start", "sample", "granularity"}));
    DgcOptions options;
    BALLOT_ASSIGN_OR_RETURN(options.ratio, spec.get_double("ratio", options.ratio));
    BALLOT_ASSIGN_OR_RETURN(const double momentum, spec.get_double("momentum", options.momentum));
    BALLOT_ASSIGN_OR_RETURN(const double clip, spec.get_double("clip", 0.0));
    BALLOT_ASSIGN_OR_RETURN(const std::int64_t warmup, spec.get_int("warmup", 0));
    BALLOT_ASSIGN_OR_RETURN(options.warmup_start, spec.get_double("warmup_start", options.warmup_start));
    BALLOT_ASSIGN_OR_RETURN(options.sample, spec.get_double("sample", options.sample));
    BALLOT_ASSIGN_OR_RETURN(options.granularity, granularity_option(spec, Granularity::kLayer));
    if (!(options.ratio > 0.0 && options.ratio <= 1.0)) return invalid(spec, "ratio must be in (0, 1]");
    if (!(momentum >= 0.0 && momentum < 1.0)) return invalid(spec, "momentum must be in [0, 1)");
    if (!(clip >= 0.0 && std::isfinite(clip))) return invalid(spec, "clip must be finite and >= 0");
    if (warmup < 0) return invalid(spec, "warmup must be >= 0 rounds");
    if (!(options.warmup_start > 0.0 && options.warmup_start <= 1.0)) return invalid(spec, "warmup_start must be in (0, 1]");
    if (!(options.sample > 0.0 && options.sample <= 1.0)) return invalid(spec, "sample must be in (0, 1]");
    options.momentum = static_cast<float>(momentum);
    options.clip = static_cast<float>(clip);
    options.warmup = static_cast<std::uint64_t>(warmup);
    return std::unique_ptr<Codec>(std::make_unique<DgcCodec>(options));
  }
  return invalid(spec, "unknown codec '" + name + "'");
}

}  // namespace

std::vector<std::string> codec_names() {
  return {"fp32", "fp16", "bf16", "sign", "scaled_sign", "signum", "onebit", "topk",
          "randomk", "gtopk", "threshold", "qsgd", "terngrad", "dgc"};
}

Result<std::unique_ptr<Codec>> make_codec(const Spec& spec) {
  BALLOT_ASSIGN_OR_RETURN(std::unique_ptr<Codec> codec, make_inner(spec));
  BALLOT_ASSIGN_OR_RETURN(const bool ef, spec.get_bool("ef", spec.name() == "onebit"));
  if (ef && (spec.name() == "gtopk" || spec.name() == "dgc")) {
    return invalid(spec, spec.name() + " keeps its own residual; ef=1 would add a second one");
  }
  if (ef) return std::unique_ptr<Codec>(std::make_unique<ErrorFeedback>(std::move(codec)));
  return codec;
}

Result<std::unique_ptr<Codec>> make_codec(std::string_view text) {
  BALLOT_ASSIGN_OR_RETURN(const Spec spec, Spec::parse(text));
  return make_codec(spec);
}

}  // namespace ballot::coding

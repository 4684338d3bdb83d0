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

using Made = Result<std::unique_ptr<Codec>>;

template <FloatFormat format>
Made make_cast(const Spec&) {
  return std::unique_ptr<Codec>(std::make_unique<CastCodec>(format));
}

Made make_sign(const Spec&) {
  return std::unique_ptr<Codec>(std::make_unique<SignCodec>(SignKind::kSign, Granularity::kModel));
}

template <SignKind kind>
Made make_scaled_sign(const Spec& spec) {
  BALLOT_ASSIGN_OR_RETURN(const Granularity granularity, granularity_option(spec, Granularity::kLayer));
  return std::unique_ptr<Codec>(std::make_unique<SignCodec>(kind, granularity));
}

Made make_signum(const Spec& spec) {
  BALLOT_ASSIGN_OR_RETURN(const double beta, spec.get_double("beta", 0.9));
  if (!(beta >= 0.0 && beta < 1.0)) return invalid(spec, "beta must be in [0, 1)");
  return std::unique_ptr<Codec>(std::make_unique<SignumCodec>(SignumOptions{beta}));
}

template <typename SparseCodec>
Made make_sparse(const Spec& spec) {
  BALLOT_ASSIGN_OR_RETURN(const SparseOptions options, sparse_options(spec));
  return std::unique_ptr<Codec>(std::make_unique<SparseCodec>(options));
}

Made make_threshold(const Spec& spec) {
  if (!spec.has("tau")) return invalid(spec, "threshold needs tau");
  BALLOT_ASSIGN_OR_RETURN(const double tau, spec.get_double("tau", 0.0));
  if (!(tau >= 0.0 && std::isfinite(static_cast<float>(tau))))
    return invalid(spec, "tau must be >= 0 and finite as a float (at most 3.4e38)");
  return std::unique_ptr<Codec>(std::make_unique<ThresholdCodec>(ThresholdOptions{static_cast<float>(tau)}));
}

Made make_qsgd(const Spec& spec) {
  QsgdOptions options;
  BALLOT_ASSIGN_OR_RETURN(const std::int64_t s, spec.get_int("s", 16));
  if (s < 1 || s > QsgdCodec::kMaxLevels) return invalid(spec, "s must be in [1, 65535]");
  options.s = static_cast<std::uint32_t>(s);
  BALLOT_ASSIGN_OR_RETURN(options.elias, spec.get_bool("elias", false));
  BALLOT_ASSIGN_OR_RETURN(options.granularity, granularity_option(spec, Granularity::kModel));
  return std::unique_ptr<Codec>(std::make_unique<QsgdCodec>(options));
}

Made make_terngrad(const Spec& spec) {
  TernGradOptions options;
  BALLOT_ASSIGN_OR_RETURN(const double clip, spec.get_double("clip", 0.0));
  if (!(clip >= 0.0 && std::isfinite(static_cast<float>(clip))))
    return invalid(spec, "clip must be >= 0 and finite as a float (at most 3.4e38)");
  options.clip = static_cast<float>(clip);
  BALLOT_ASSIGN_OR_RETURN(options.granularity, granularity_option(spec, Granularity::kLayer));
  return std::unique_ptr<Codec>(std::make_unique<TernGradCodec>(options));
}

Made make_dgc(const Spec& spec) {
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
  if (!(clip >= 0.0 && std::isfinite(static_cast<float>(clip))))
    return invalid(spec, "clip must be >= 0 and finite as a float (at most 3.4e38)");
  if (warmup < 0) return invalid(spec, "warmup must be >= 0 rounds");
  if (!(options.warmup_start > 0.0 && options.warmup_start <= 1.0))
    return invalid(spec, "warmup_start must be in (0, 1]");
  if (!(options.sample > 0.0 && options.sample <= 1.0)) return invalid(spec, "sample must be in (0, 1]");
  options.momentum = static_cast<float>(momentum);
  options.clip = static_cast<float>(clip);
  options.warmup = static_cast<std::uint64_t>(warmup);
  return std::unique_ptr<Codec>(std::make_unique<DgcCodec>(options));
}

constexpr CodecProperties id(CodecId codec_id) { return {.id = codec_id}; }

// One line per codec: name, keys (besides ef), example, summary, factory, {wire id, error
// feedback by default, keeps its own residual}. docs/codecs.md has the formulas and sizes.
const CodecEntry kCodecs[] = {
    {"fp32", "", "fp32", "uncompressed float32", &make_cast<FloatFormat::kFp32>, id(CodecId::kFp32)},
    {"fp16", "", "fp16", "IEEE binary16, round to nearest even", &make_cast<FloatFormat::kFp16>, id(CodecId::kFp16)},
    {"bf16", "", "bf16", "bfloat16, round to nearest even", &make_cast<FloatFormat::kBf16>, id(CodecId::kBf16)},
    {"sign", "", "sign", "sign(g) (Bernstein et al., ICML 2018)", &make_sign, id(CodecId::kSign)},
    {"scaled_sign", "granularity", "scaled_sign", "(|g|_1/d) sign(g) (Karimireddy et al., ICML 2019)",
     &make_scaled_sign<SignKind::kScaledSign>, id(CodecId::kScaledSign)},
    {"signum", "beta", "signum", "sign of the momentum (Bernstein et al., ICML 2018)", &make_signum,
     id(CodecId::kSignum)},
    {"onebit",
     "granularity",
     "onebit",
     "1-bit SGD with error feedback (Seide et al., Interspeech 2014)",
     &make_scaled_sign<SignKind::kOneBit>,
     {.id = CodecId::kOneBit, .error_feedback = true}},
    {"topk", "k ratio granularity", "topk:ratio=0.05", "the k largest |g_i| (Aji & Heafield, EMNLP 2017)",
     &make_sparse<TopKCodec>, id(CodecId::kTopK)},
    {"randomk",
     "k ratio granularity",
     "randomk:ratio=0.1",
     "k random coordinates, unbiased (Stich et al. 2018)",
     &make_sparse<RandomKCodec>,
     {.id = CodecId::kRandomK, .unbiased = true}},
    {"gtopk",
     "k ratio granularity",
     "gtopk:ratio=0.05",
     "global top-k with its own residual (Shi et al., ICDCS 2019)",
     &make_sparse<GlobalTopKCodec>,
     {.id = CodecId::kGlobalTopK, .own_residual = true}},
    {"threshold", "tau", "threshold:tau=0.8", "every |g_i| >= tau (Strom, Interspeech 2015)", &make_threshold,
     id(CodecId::kThreshold)},
    {"qsgd",
     "s elias granularity",
     "qsgd:s=16",
     "stochastic s-level quantisation (Alistarh et al., NeurIPS 2017)",
     &make_qsgd,
     {.id = CodecId::kQsgd, .unbiased = true}},
    {"terngrad",
     "clip granularity",
     "terngrad",
     "stochastic ternary {-s, 0, s} (Wen et al., NeurIPS 2017)",
     &make_terngrad,
     {.id = CodecId::kTernGrad, .unbiased = true}},
    {"dgc",
     "ratio momentum clip warmup warmup_start sample granularity",
     "dgc:ratio=0.05",
     "deep gradient compression (Lin et al., ICLR 2018)",
     &make_dgc,
     {.id = CodecId::kDgc, .own_residual = true}},
};

}  // namespace

std::span<const CodecEntry> codec_table() { return kCodecs; }

std::vector<std::string> codec_names() { return entry_names(codec_table()); }

const CodecEntry* find_codec(CodecId codec_id) noexcept {
  for (const CodecEntry& entry : codec_table())
    if (entry.properties.id == codec_id) return &entry;
  return nullptr;
}

Result<std::unique_ptr<Codec>> make_codec(const Spec& spec) {
  const CodecEntry* entry = find_entry(codec_table(), spec.name());
  if (entry == nullptr)
    return invalid(spec, "unknown codec '" + spec.name() + "' (codecs: " + joined_names(codec_table()) + ")");
  BALLOT_TRY(spec.check_known(key_set(entry->keys, {"ef"})));
  BALLOT_ASSIGN_OR_RETURN(std::unique_ptr<Codec> codec, entry->make(spec));
  BALLOT_ASSIGN_OR_RETURN(const bool ef, spec.get_bool("ef", entry->properties.error_feedback));
  if (ef && entry->properties.own_residual) {
    return invalid(spec, spec.name() + " keeps its own residual; ef=1 would add a second one");
  }
  if (ef && entry->properties.unbiased) {
    return invalid(spec, spec.name() +
                             " is unbiased but not contractive: error feedback over it diverges (its memory grows "
                             "every round); use ef=0 (it converges without memory) or a contractive codec with ef=1 "
                             "(topk, scaled_sign, sign, threshold)");
  }
  if (ef) return std::unique_ptr<Codec>(std::make_unique<ErrorFeedback>(std::move(codec)));
  return codec;
}

Result<std::unique_ptr<Codec>> make_codec(std::string_view text) {
  BALLOT_ASSIGN_OR_RETURN(const Spec spec, Spec::parse(text));
  return make_codec(spec);
}

}  // namespace ballot::coding

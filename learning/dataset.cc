#include "learning/dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <unordered_set>
#include <utility>

#include "core/byte_io.h"
#include "core/enforce.h"

namespace ballot::learning {
namespace {

constexpr std::uint64_t kSyntheticPurpose = 0x73796e7468000000ULL;  // "synth"
constexpr std::uint64_t kSplitPurpose = 0x73706c6974000000ULL;      // "split"

std::string describe(std::string_view name) { return "IDX file '" + std::string(name) + "'"; }

// ByteReader reads little-endian (Ballot's formats); IDX headers are big-endian.
std::uint32_t from_big_endian(std::uint32_t little) {
  return ((little & 0xffu) << 24) | ((little & 0xff00u) << 8) | ((little >> 8) & 0xff00u) | (little >> 24);
}

// Reads a whole file, inflating it when it starts with the gzip magic. Never reads more than
// `cap` bytes of content: a larger file is kLimitExceeded before it is held in memory.
Result<std::vector<std::uint8_t>> read_maybe_gzip(const std::string& path, std::size_t cap) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return make_error(ErrorCode::kNotFound, "file '" + path + "' does not exist or is not a regular file");
  }
  std::uint8_t magic[2] = {0, 0};
  std::size_t magic_len = 0;
  {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return make_error(ErrorCode::kIo, "cannot open '" + path + "'");
    magic_len = std::fread(magic, 1, 2, f);
    std::fclose(f);
  }
  const bool gzipped = magic_len == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  std::vector<std::uint8_t> out;
  if (!gzipped) {
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return make_error(ErrorCode::kIo, "cannot stat '" + path + "': " + ec.message());
    if (size > cap) {
      return make_error(ErrorCode::kLimitExceeded, "file '" + path + "' has " + std::to_string(size) +
                                                       " bytes, above the limit " + std::to_string(cap));
    }
    out.resize(static_cast<std::size_t>(size));
    std::ifstream in(path, std::ios::binary);
    if (!in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()))) {
      return make_error(ErrorCode::kIo, "cannot read '" + path + "'");
    }
    return out;
  }
  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) return make_error(ErrorCode::kIo, "cannot open '" + path + "' with zlib");
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  for (;;) {
    const std::size_t old = out.size();
    if (old > cap) break;
    const std::size_t want = std::min(kChunk, cap + 1 - old);
    out.resize(old + want);
    const int got = gzread(gz, out.data() + old, static_cast<unsigned>(want));
    if (got < 0) {
      int errnum = 0;
      std::string message = gzerror(gz, &errnum);
      gzclose(gz);
      return make_error(ErrorCode::kMalformed, "gzip file '" + path + "' is corrupt: " + message);
    }
    out.resize(old + static_cast<std::size_t>(got));
    if (static_cast<std::size_t>(got) < want) break;
  }
  int errnum = Z_OK;
  std::string message = gzerror(gz, &errnum);
  gzclose(gz);
  // A truncated stream surfaces as Z_BUF_ERROR ("unexpected end of file") after the last read.
  if (errnum != Z_OK && errnum != Z_STREAM_END) {
    return make_error(ErrorCode::kMalformed, "gzip file '" + path + "' is truncated or corrupt: " + message);
  }
  if (out.size() > cap) {
    return make_error(ErrorCode::kLimitExceeded,
                      "gzip file '" + path + "' inflates to more than " + std::to_string(cap) + " bytes");
  }
  return out;
}

std::vector<std::uint32_t> floyd_sample(Rng& rng, std::size_t pool, std::size_t k) {
  std::vector<std::uint32_t> out;
  out.reserve(k);
  if (k > pool) {  // more than the pool holds: with replacement
    for (std::size_t i = 0; i < k; ++i) out.push_back(static_cast<std::uint32_t>(rng.uniform_int(pool)));
    return out;
  }
  // Floyd's algorithm: k distinct values with k draws, whatever the pool size.
  std::unordered_set<std::uint32_t> seen;
  seen.reserve(2 * k);
  for (std::size_t j = pool - k; j < pool; ++j) {
    auto t = static_cast<std::uint32_t>(rng.uniform_int(j + 1));
    if (!seen.insert(t).second) {
      t = static_cast<std::uint32_t>(j);
      seen.insert(t);
    }
    out.push_back(t);
  }
  return out;
}

}  // namespace

std::span<const float> Dataset::example(std::size_t i) const {
  BALLOT_ENFORCE_LT(i, size());
  return std::span<const float>(features).subspan(i * num_features, num_features);
}

void gather(const Dataset& data, std::span<const std::uint32_t> indices, Batch& out) {
  out.num_features = data.num_features;
  out.features.resize(indices.size() * data.num_features);
  out.labels.resize(indices.size());
  for (std::size_t k = 0; k < indices.size(); ++k) {
    const auto src = data.example(indices[k]);
    std::copy(src.begin(), src.end(), out.features.begin() + static_cast<std::ptrdiff_t>(k * data.num_features));
    out.labels[k] = data.labels[indices[k]];
  }
}

Batch gather(const Dataset& data, std::span<const std::uint32_t> indices) {
  Batch batch;
  gather(data, indices, batch);
  return batch;
}

// ---- IDX ----------------------------------------------------------------------------------------

Result<IdxArray> parse_idx(std::span<const std::uint8_t> bytes, std::string_view name, const IdxLimits& limits) {
  if (bytes.size() < 4) {
    return make_error(ErrorCode::kMalformed, describe(name) + " is " + std::to_string(bytes.size()) +
                                                 " bytes long, shorter than the 4-byte magic");
  }
  // The length checks above and below come first so that the errors name the file; the reader
  // then cannot fail on the fields they cover.
  ByteReader in(bytes, "IDX file");
  BALLOT_ASSIGN_OR_RETURN(const auto zero0, in.read<std::uint8_t>("magic"));
  BALLOT_ASSIGN_OR_RETURN(const auto zero1, in.read<std::uint8_t>("magic"));
  if (zero0 != 0 || zero1 != 0) {
    return make_error(ErrorCode::kMalformed, describe(name) + " has a bad magic (first two bytes must be 0)");
  }
  BALLOT_ASSIGN_OR_RETURN(const auto type, in.read<std::uint8_t>("element type"));
  if (type != 0x08) {
    return make_error(
        ErrorCode::kMalformed, describe(name) + " has element type 0x" + [&] {
          char b[8];
          std::snprintf(b, sizeof b, "%02x", type);
          return std::string(b);
        }() + ", only unsigned bytes (0x08) are supported");
  }
  BALLOT_ASSIGN_OR_RETURN(const std::size_t ndim, in.read<std::uint8_t>("dimension count"));
  if (ndim == 0 || ndim > limits.max_dims) {
    return make_error(ErrorCode::kMalformed, describe(name) + " has " + std::to_string(ndim) +
                                                 " dimensions, expected 1.." + std::to_string(limits.max_dims));
  }
  const std::size_t header = 4 + 4 * ndim;
  if (bytes.size() < header) {
    return make_error(ErrorCode::kMalformed, describe(name) + " is truncated inside its header (" +
                                                 std::to_string(bytes.size()) + " of " + std::to_string(header) +
                                                 " bytes)");
  }
  IdxArray array;
  std::size_t count = 1;
  for (std::size_t k = 0; k < ndim; ++k) {
    BALLOT_ASSIGN_OR_RETURN(const auto raw, in.read<std::uint32_t>("dimension"));
    const std::uint32_t dim = from_big_endian(raw);  // IDX stores its dimensions big-endian
    array.dims.push_back(dim);
    // Overflow-safe: count * dim <= max_bytes  <=>  dim <= max_bytes / count (count >= 1).
    if (dim != 0 && count > limits.max_bytes / dim) {
      return make_error(ErrorCode::kLimitExceeded,
                        describe(name) + " declares more than " + std::to_string(limits.max_bytes) + " elements");
    }
    count *= dim;
  }
  const std::size_t payload = in.remaining();
  if (payload != count) {
    return make_error(ErrorCode::kMalformed, describe(name) +
                                                 (payload < count ? " is truncated" : " has trailing bytes") +
                                                 ": the header declares " + std::to_string(count) +
                                                 " data bytes, the file holds " + std::to_string(payload));
  }
  BALLOT_ASSIGN_OR_RETURN(array.data, in.read_array<std::uint8_t>(count, "data"));
  BALLOT_TRY(in.expect_end());
  return array;
}

Result<IdxArray> read_idx_file(const std::string& path, const IdxLimits& limits) {
  // The header (magic and dims) on top of the data, saturating: a limit near SIZE_MAX means none.
  const std::size_t header = 4 + 4 * std::min<std::size_t>(limits.max_dims, 255);
  const std::size_t cap = limits.max_bytes > SIZE_MAX - header ? SIZE_MAX : limits.max_bytes + header;
  BALLOT_ASSIGN_OR_RETURN(auto bytes, read_maybe_gzip(path, cap));
  return parse_idx(bytes, path, limits);
}

Result<Dataset> load_idx_dataset(const std::string& images_path, const std::string& labels_path,
                                 std::size_t num_classes, const IdxLimits& limits) {
  if (num_classes == 0 || num_classes > 256) {
    return make_error(ErrorCode::kInvalidArgument, "num_classes must be in 1..256, got " + std::to_string(num_classes));
  }
  BALLOT_ASSIGN_OR_RETURN(auto images, read_idx_file(images_path, limits));
  BALLOT_ASSIGN_OR_RETURN(auto labels, read_idx_file(labels_path, limits));
  if (images.dims.size() != 3) {
    return make_error(ErrorCode::kMalformed, describe(images_path) + " has " + std::to_string(images.dims.size()) +
                                                 " dimensions, an images file has 3 (count, rows, cols)");
  }
  if (images.dims[1] == 0 || images.dims[2] == 0) {
    return make_error(ErrorCode::kMalformed, describe(images_path) + " holds images of " +
                                                 std::to_string(images.dims[1]) + " x " +
                                                 std::to_string(images.dims[2]) + " pixels: no features to learn from");
  }
  if (labels.dims.size() != 1) {
    return make_error(ErrorCode::kMalformed, describe(labels_path) + " has " + std::to_string(labels.dims.size()) +
                                                 " dimensions, a labels file has 1");
  }
  if (images.dims[0] != labels.dims[0]) {
    return make_error(ErrorCode::kMalformed, describe(images_path) + " holds " + std::to_string(images.dims[0]) +
                                                 " images but " + describe(labels_path) + " holds " +
                                                 std::to_string(labels.dims[0]) + " labels");
  }
  for (std::size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= num_classes) {
      return make_error(ErrorCode::kMalformed, describe(labels_path) + ": label " + std::to_string(labels.data[i]) +
                                                   " of example " + std::to_string(i) + " is not below " +
                                                   std::to_string(num_classes));
    }
  }
  Dataset data;
  data.rows = images.dims[1];
  data.cols = images.dims[2];
  data.channels = 1;
  data.num_features = data.rows * data.cols;
  data.num_classes = num_classes;
  data.features.resize(images.data.size());
  constexpr float kScale = 1.0f / 255.0f;
  const std::uint8_t* pixels = images.data.data();
  float* out = data.features.data();
  for (std::size_t i = 0, n = images.data.size(); i < n; ++i) out[i] = static_cast<float>(pixels[i]) * kScale;
  data.labels = std::move(labels.data);
  return data;
}

Result<TrainTestSplit> load_mnist_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  auto find = [&](const std::string& prefix, const std::string& kind) -> Result<std::string> {
    // MNIST's names, "train-images-idx3-ubyte", and the dotted variant "train-images.idx3-ubyte".
    for (const std::string sep : {"-", "."}) {
      for (const std::string ext : {".gz", ""}) {
        const fs::path p = fs::path(dir) / (prefix + sep + kind + "-ubyte" + ext);
        std::error_code ec;
        if (fs::is_regular_file(p, ec)) return p.string();
      }
    }
    return make_error(ErrorCode::kNotFound, "no '" + prefix + "-" + kind + "-ubyte[.gz]' in directory '" + dir + "'");
  };
  BALLOT_ASSIGN_OR_RETURN(auto train_images, find("train-images", "idx3"));
  BALLOT_ASSIGN_OR_RETURN(auto train_labels, find("train-labels", "idx1"));
  BALLOT_ASSIGN_OR_RETURN(auto test_images, find("t10k-images", "idx3"));
  BALLOT_ASSIGN_OR_RETURN(auto test_labels, find("t10k-labels", "idx1"));
  TrainTestSplit split;
  BALLOT_ASSIGN_OR_RETURN(split.train, load_idx_dataset(train_images, train_labels));
  BALLOT_ASSIGN_OR_RETURN(split.test, load_idx_dataset(test_images, test_labels));
  const auto shape = [](const Dataset& d) {
    return std::to_string(d.rows) + "×" + std::to_string(d.cols) + "×" + std::to_string(d.channels);
  };
  if (split.train.num_features != split.test.num_features || shape(split.train) != shape(split.test)) {
    return make_error(ErrorCode::kMalformed, "train and test images in '" + dir + "' differ in shape (" +
                                                 shape(split.train) + " and " + shape(split.test) + ")");
  }
  return split;
}

Result<TrainTestSplit> load_fashion_mnist(const std::string& dir) { return load_mnist_dir(dir); }

// ---- synthetic ----------------------------------------------------------------------------------

namespace {
Status check_synthetic(const SyntheticOptions& o) {
  if (o.num_examples == 0 || o.num_features == 0 || o.num_classes < 2 || o.num_classes > 256) {
    return make_error(ErrorCode::kInvalidArgument,
                      "synthetic data needs examples > 0, features > 0 and 2..256 classes");
  }
  if (!(o.noise > 0.0) || !(o.separation >= 0.0) || !std::isfinite(o.noise) || !std::isfinite(o.separation)) {
    return make_error(ErrorCode::kInvalidArgument, "synthetic data needs noise > 0 and separation >= 0, finite");
  }
  if ((o.image_rows != 0 || o.image_cols != 0) && o.image_rows * o.image_cols != o.num_features) {
    return make_error(ErrorCode::kInvalidArgument, "image_rows * image_cols must equal num_features");
  }
  return {};
}

Dataset synthetic_draw(const SyntheticOptions& o, std::size_t n, std::uint64_t stream) {
  Dataset data;
  data.num_features = o.num_features;
  data.num_classes = o.num_classes;
  if (o.image_rows != 0) {
    data.rows = o.image_rows;
    data.cols = o.image_cols;
    data.channels = 1;
  }
  Rng means_rng(o.seed, Rng::stream_id({kSyntheticPurpose, 0}));
  std::vector<double> means(o.num_classes * o.num_features);
  for (auto& m : means) m = o.separation * means_rng.normal();
  Rng rng(o.seed, Rng::stream_id({kSyntheticPurpose, stream}));
  data.labels.resize(n);
  for (std::size_t i = 0; i < n; ++i) data.labels[i] = static_cast<std::uint8_t>(i % o.num_classes);
  rng.shuffle(std::span<std::uint8_t>(data.labels));
  data.features.resize(n * o.num_features);
  for (std::size_t i = 0; i < n; ++i) {
    const double* mu = means.data() + data.labels[i] * o.num_features;
    for (std::size_t f = 0; f < o.num_features; ++f) {
      data.features[i * o.num_features + f] = static_cast<float>(mu[f] + o.noise * rng.normal());
    }
  }
  return data;
}
}  // namespace

Result<Dataset> make_synthetic(const SyntheticOptions& options) {
  BALLOT_TRY(check_synthetic(options));
  return synthetic_draw(options, options.num_examples, 1);
}

Result<Dataset> make_synthetic_test(const SyntheticOptions& options, std::size_t num_examples) {
  BALLOT_TRY(check_synthetic(options));
  if (num_examples == 0) return make_error(ErrorCode::kInvalidArgument, "a test set needs examples");
  return synthetic_draw(options, num_examples, 2);
}

// ---- partitions ---------------------------------------------------------------------------------

PartitionSampler::PartitionSampler(PartitionOptions options, std::size_t dataset_size)
    : options_(options), dataset_size_(dataset_size) {
  BALLOT_ENFORCE_GT(dataset_size, 0u);
  BALLOT_ENFORCE_LE(dataset_size, std::size_t{UINT32_MAX});
}

PartitionSampler::PartitionSampler(PartitionOptions options, std::vector<std::vector<std::uint32_t>> shards)
    : options_(options), shards_(std::move(shards)) {
  BALLOT_ENFORCE(!shards_.empty(), "a sampler needs at least one shard");
  for (const auto& s : shards_) BALLOT_ENFORCE(!s.empty(), "every shard must hold an example");
}

std::vector<std::uint32_t> PartitionSampler::indices(std::uint64_t round, std::uint64_t partition) const {
  Rng rng(options_.seed, Rng::stream_id({round, partition, kPartitionPurpose}));
  if (shards_.empty()) return floyd_sample(rng, dataset_size_, options_.partition_size);
  const auto& shard = shards_[partition % shards_.size()];
  auto positions = floyd_sample(rng, shard.size(), options_.partition_size);
  for (auto& p : positions) p = shard[p];
  return positions;
}

// ---- splits -------------------------------------------------------------------------------------

Result<std::vector<std::vector<std::uint32_t>>> split_iid(std::size_t num_examples, std::size_t num_nodes,
                                                          std::uint64_t seed) {
  if (num_nodes == 0 || num_nodes > num_examples || num_examples > UINT32_MAX) {
    return make_error(ErrorCode::kInvalidArgument, "an iid split of " + std::to_string(num_examples) +
                                                       " examples over " + std::to_string(num_nodes) +
                                                       " nodes needs 1 <= nodes <= examples");
  }
  std::vector<std::uint32_t> perm(num_examples);
  std::iota(perm.begin(), perm.end(), 0u);
  Rng rng(seed, Rng::stream_id({kSplitPurpose, 0}));
  rng.shuffle(std::span<std::uint32_t>(perm));
  std::vector<std::vector<std::uint32_t>> shards(num_nodes);
  const std::size_t base = num_examples / num_nodes, extra = num_examples % num_nodes;
  std::size_t at = 0;
  for (std::size_t i = 0; i < num_nodes; ++i) {
    const std::size_t len = base + (i < extra ? 1 : 0);
    shards[i].assign(perm.begin() + static_cast<std::ptrdiff_t>(at),
                     perm.begin() + static_cast<std::ptrdiff_t>(at + len));
    std::sort(shards[i].begin(), shards[i].end());
    at += len;
  }
  return shards;
}

double sample_gamma(Rng& rng, double shape) {
  BALLOT_ENFORCE(shape > 0.0 && std::isfinite(shape), "gamma shape must be positive and finite");
  if (shape < 1.0) {
    // Gamma(a) = Gamma(a + 1) · U^(1/a)  (Marsaglia & Tsang 2000, §6).
    const double g = sample_gamma(rng, shape + 1.0);
    double u = rng.uniform_double();
    return g * std::pow(u, 1.0 / shape);
  }
  // Marsaglia & Tsang (2000): d = a − 1/3, c = 1/√(9d); accept d·v with v = (1 + c·x)³.
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = rng.normal();
    double v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    const double u = rng.uniform_double();
    if (u < 1.0 - 0.0331 * (x * x) * (x * x)) return d * v;
    if (u > 0.0 && std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

Result<std::vector<std::vector<std::uint32_t>>> split_dirichlet(std::span<const std::uint8_t> labels,
                                                                std::size_t num_classes, std::size_t num_nodes,
                                                                const DirichletOptions& options) {
  if (num_nodes == 0 || num_classes == 0 || labels.size() > UINT32_MAX) {
    return make_error(ErrorCode::kInvalidArgument, "a Dirichlet split needs nodes > 0 and classes > 0");
  }
  if (!(options.alpha > 0.0) || !std::isfinite(options.alpha)) {
    return make_error(ErrorCode::kInvalidArgument, "Dirichlet alpha must be positive and finite");
  }
  if (options.min_per_node * num_nodes > labels.size()) {
    return make_error(ErrorCode::kPrecondition, "cannot give " + std::to_string(num_nodes) + " nodes " +
                                                    std::to_string(options.min_per_node) + " examples each out of " +
                                                    std::to_string(labels.size()));
  }
  std::vector<std::vector<std::uint32_t>> by_class(num_classes);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= num_classes) {
      return make_error(ErrorCode::kInvalidArgument, "label " + std::to_string(labels[i]) + " of example " +
                                                         std::to_string(i) + " is not below " +
                                                         std::to_string(num_classes));
    }
    by_class[labels[i]].push_back(static_cast<std::uint32_t>(i));
  }
  for (std::size_t attempt = 0; attempt < options.max_attempts; ++attempt) {
    std::vector<std::vector<std::uint32_t>> shards(num_nodes);
    for (std::size_t c = 0; c < num_classes; ++c) {
      auto members = by_class[c];
      if (members.empty()) continue;
      Rng rng(options.seed, Rng::stream_id({kSplitPurpose, 1, attempt, c}));
      std::vector<double> p(num_nodes);
      double total = 0.0;
      for (auto& x : p) total += (x = sample_gamma(rng, options.alpha));
      if (!(total > 0.0)) {  // every draw underflowed (tiny α): the class goes to one node
        std::fill(p.begin(), p.end(), 0.0);
        p[rng.uniform_int(num_nodes)] = 1.0;
        total = 1.0;
      }
      rng.shuffle(std::span<std::uint32_t>(members));
      // Cut sizes: floors, then the remainder to the largest fractional parts (lower index first).
      const double n_c = static_cast<double>(members.size());
      std::vector<std::size_t> sizes(num_nodes);
      std::vector<std::pair<double, std::size_t>> fractions(num_nodes);
      std::size_t assigned = 0;
      for (std::size_t i = 0; i < num_nodes; ++i) {
        const double exact = p[i] / total * n_c;
        sizes[i] = static_cast<std::size_t>(std::floor(exact));
        fractions[i] = {exact - static_cast<double>(sizes[i]), i};
        assigned += sizes[i];
      }
      std::stable_sort(fractions.begin(), fractions.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      for (std::size_t k = 0; assigned < members.size(); ++k, ++assigned) ++sizes[fractions[k % num_nodes].second];
      std::size_t at = 0;
      for (std::size_t i = 0; i < num_nodes; ++i) {
        shards[i].insert(shards[i].end(), members.begin() + static_cast<std::ptrdiff_t>(at),
                         members.begin() + static_cast<std::ptrdiff_t>(at + sizes[i]));
        at += sizes[i];
      }
    }
    const bool ok =
        std::all_of(shards.begin(), shards.end(), [&](const auto& s) { return s.size() >= options.min_per_node; });
    if (ok) {
      for (auto& s : shards) std::sort(s.begin(), s.end());
      return shards;
    }
  }
  return make_error(ErrorCode::kPrecondition, "no Dirichlet(" + std::to_string(options.alpha) + ") split over " +
                                                  std::to_string(num_nodes) + " nodes gave every node " +
                                                  std::to_string(options.min_per_node) + " examples in " +
                                                  std::to_string(options.max_attempts) + " attempts");
}

}  // namespace ballot::learning

// Datasets for training: an in-memory labelled dataset, the IDX loader for MNIST and
// Fashion-MNIST (gzip'd or plain), a seeded synthetic dataset, deterministic partition sampling
// for the round protocol, and iid / Dirichlet(α) splits of a training set over nodes.
//
// Determinism: every random choice here draws from ballot::Rng streams keyed by structured
// coordinates (Rng(seed, Rng::stream_id({...}))), so two processes that ask for the same thing
// get the same answer. The normal and gamma draws use libm (log, sqrt, cos, pow), so they are
// reproducible for one build and C library (see core/rng.h).
// Thread-safety: free functions are reentrant; a Dataset is safe to read concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/rng.h"

namespace ballot::learning {

// n labelled examples of `num_features` floats each, row-major. Images are stored as
// rows × cols × channels (channel fastest), pixel values scaled to [0, 1].
struct Dataset {
  std::size_t num_features = 0;
  std::size_t num_classes = 0;
  std::size_t rows = 0, cols = 0, channels = 0;  // image shape; all 0 for generic features
  std::vector<float> features;                   // size() × num_features
  std::vector<std::uint8_t> labels;              // size(), each < num_classes

  std::size_t size() const noexcept { return labels.size(); }
  bool is_image() const noexcept { return rows != 0; }
  std::span<const float> example(std::size_t i) const;  // i < size() (BALLOT_ENFORCE)
};

// A contiguous copy of some examples of a Dataset, ready for Model::forward_backward.
struct Batch {
  std::size_t num_features = 0;
  std::vector<float> features;  // size() × num_features
  std::vector<std::uint8_t> labels;
  std::size_t size() const noexcept { return labels.size(); }
};

// Copies examples `indices` (each < data.size(), BALLOT_ENFORCE) into `out`, reusing its storage.
void gather(const Dataset& data, std::span<const std::uint32_t> indices, Batch& out);
Batch gather(const Dataset& data, std::span<const std::uint32_t> indices);

// ---- IDX files (LeCun's format, used by MNIST and Fashion-MNIST) ------------------------------

// A decoded IDX array of unsigned bytes (type code 0x08), the only type MNIST-style files use.
struct IdxArray {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> data;  // product(dims) bytes, row-major
};

struct IdxLimits {
  std::size_t max_bytes = std::size_t{1} << 30;  // decompressed payload cap, checked before use
  std::size_t max_dims = 4;
};

// Parses an IDX image held in memory: magic 0x00 0x00 0x08 <ndim>, ndim big-endian uint32
// dimensions, then exactly product(dims) bytes (trailing or missing bytes are kMalformed, an
// oversized product kLimitExceeded). `name` is used in error messages. O(size).
Result<IdxArray> parse_idx(std::span<const std::uint8_t> bytes, std::string_view name, const IdxLimits& limits = {});

// Reads a file, gzip'd (detected by its magic 1f 8b) or plain, and parses it with parse_idx.
// Errors name the file: kNotFound, kIo, kMalformed (bad magic, dimensions, truncated gzip or a
// length that disagrees with the header), kLimitExceeded.
Result<IdxArray> read_idx_file(const std::string& path, const IdxLimits& limits = {});

// An images file (3 dims: n, rows, cols) and a labels file (1 dim: n) with the same n and every
// label < num_classes, as a Dataset with pixels scaled by 1/255.
Result<Dataset> load_idx_dataset(const std::string& images_path, const std::string& labels_path,
                                 std::size_t num_classes = 10, const IdxLimits& limits = {});

struct TrainTestSplit {
  Dataset train;
  Dataset test;
};

inline constexpr std::string_view kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Loads {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from `dir` (the MNIST naming, also
// used by Fashion-MNIST; the ".idx3-ubyte" variant is accepted too). kNotFound names the
// missing file.
Result<TrainTestSplit> load_mnist_dir(const std::string& dir);
// The Debian package dataset-fashion-mnist installs the files in kDefaultFashionMnistDir.
Result<TrainTestSplit> load_fashion_mnist(const std::string& dir = std::string(kDefaultFashionMnistDir));

// ---- synthetic data ----------------------------------------------------------------------------

// Gaussian clusters: class c has a mean μ_c ~ N(0, separation²·I) (drawn once from the seed);
// an example of class c is μ_c + noise·N(0, I); labels are balanced (i mod num_classes, then
// shuffled). Learnable by every built-in model when separation/noise is ~1 or more.
// With image_rows·image_cols = num_features the result is marked as a 1-channel image
// (values are then not limited to [0, 1]).
struct SyntheticOptions {
  std::size_t num_examples = 1024;
  std::size_t num_features = 16;
  std::size_t num_classes = 4;
  double separation = 1.0;
  double noise = 1.0;
  std::size_t image_rows = 0, image_cols = 0;
  std::uint64_t seed = 1;
};
// Invalid options (zero sizes, more than 256 classes, non-positive noise, image shape not
// matching num_features) are kInvalidArgument.
Result<Dataset> make_synthetic(const SyntheticOptions& options);
// The same clusters (same seed) with fresh examples: a held-out test set for make_synthetic.
Result<Dataset> make_synthetic_test(const SyntheticOptions& options, std::size_t num_examples);

// ---- partitions of a round's global batch ------------------------------------------------------

// Round r's global batch is n partitions of `partition_size` examples. Partition j of round r is
// a pure function of (seed, r, j, partition_size, pool): it draws partition_size distinct
// positions of the pool with Floyd's algorithm from Rng(seed, stream_id({r, j,
// kPartitionPurpose})). So every node that computes partition j (replicated election coding)
// gets the same batch, whatever else it computed before. If partition_size exceeds the pool,
// positions repeat (sampling with replacement). O(partition_size log partition_size).
inline constexpr std::uint64_t kPartitionPurpose = 0x7061727469746e00ULL;  // "partitn"

struct PartitionOptions {
  std::uint64_t seed = 1;
  std::size_t partition_size = 32;
};

class PartitionSampler {
 public:
  // Every partition samples the whole dataset of `dataset_size` examples (iid partitions).
  PartitionSampler(PartitionOptions options, std::size_t dataset_size);
  // Partition j samples shard j mod shards.size() (e.g. a Dirichlet split: non-iid sources).
  // Shards must be non-empty (BALLOT_ENFORCE).
  PartitionSampler(PartitionOptions options, std::vector<std::vector<std::uint32_t>> shards);

  // Dataset indices of partition j of round r, in the order drawn.
  std::vector<std::uint32_t> indices(std::uint64_t round, std::uint64_t partition) const;
  const PartitionOptions& options() const noexcept { return options_; }

 private:
  PartitionOptions options_;
  std::size_t dataset_size_ = 0;
  std::vector<std::vector<std::uint32_t>> shards_;
};

// ---- splits of a training set over nodes -------------------------------------------------------

// A random permutation of [0, num_examples) dealt into num_nodes shards whose sizes differ by at
// most one. kInvalidArgument if num_nodes is 0 or exceeds num_examples.
Result<std::vector<std::vector<std::uint32_t>>> split_iid(std::size_t num_examples, std::size_t num_nodes,
                                                          std::uint64_t seed);

// Label-skewed non-iid split (Hsu, Qi, Brown 2019): for each class c, proportions
// p_c ~ Dirichlet(α·1_n) over the nodes, and class c's examples (shuffled) are cut into
// consecutive runs of sizes ⌊p_c,i·N_c⌋ (remainders by largest fraction). The draw is repeated
// (new streams) until every node holds at least min_per_node examples; kPrecondition after
// max_attempts. Small α → each node sees few classes; α → ∞ → iid. Every example is assigned to
// exactly one node. Shards list indices in increasing order.
struct DirichletOptions {
  double alpha = 0.5;
  std::size_t min_per_node = 1;
  std::size_t max_attempts = 1000;
  std::uint64_t seed = 1;
};
Result<std::vector<std::vector<std::uint32_t>>> split_dirichlet(std::span<const std::uint8_t> labels,
                                                                std::size_t num_classes, std::size_t num_nodes,
                                                                const DirichletOptions& options);

// Gamma(shape, 1) by Marsaglia & Tsang (2000), with the boost Gamma(a) = Gamma(a+1)·U^(1/a) for
// a < 1. shape > 0. Exposed for tests of the Dirichlet draw.
double sample_gamma(Rng& rng, double shape);

}  // namespace ballot::learning

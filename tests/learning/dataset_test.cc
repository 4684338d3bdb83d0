#include "learning/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <vector>

namespace ballot::learning {
namespace {

namespace fs = std::filesystem;

std::vector<std::uint8_t> idx_bytes(std::vector<std::uint32_t> dims, std::vector<std::uint8_t> data,
                                    std::uint8_t type = 0x08) {
  std::vector<std::uint8_t> out = {0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(d >> shift));
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<std::uint8_t> iota_bytes(std::size_t n, std::uint8_t modulo = 251) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(i % modulo);
  return v;
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "ballot_dataset_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (fs::path(path_) / name).string(); }

 private:
  std::string path_;
};

void write_plain(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void write_gzip(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
}

// ---- IDX ----------------------------------------------------------------------------------------

TEST(ParseIdx, DecodesDimensionsAndData) {
  const auto bytes = idx_bytes({2, 3, 2}, iota_bytes(12));
  auto array = parse_idx(bytes, "mem");
  ASSERT_TRUE(array.ok()) << array.error().to_string();
  EXPECT_EQ(array->dims, (std::vector<std::uint32_t>{2, 3, 2}));
  EXPECT_EQ(array->data, iota_bytes(12));
}

TEST(ParseIdx, RejectsEveryMalformedHeaderNamingTheSource) {
  struct Case {
    std::vector<std::uint8_t> bytes;
    ErrorCode code;
  };
  auto with = [](std::vector<std::uint8_t> b, std::size_t at, std::uint8_t v) {
    b[at] = v;
    return b;
  };
  const auto good = idx_bytes({3, 2}, iota_bytes(6));
  std::vector<Case> cases = {
      {{}, ErrorCode::kMalformed},
      {{0, 0, 8}, ErrorCode::kMalformed},                                                  // shorter than the magic
      {with(good, 0, 1), ErrorCode::kMalformed},                                           // bad magic
      {with(good, 2, 0x0d), ErrorCode::kMalformed},                                        // float type: unsupported
      {with(good, 3, 0), ErrorCode::kMalformed},                                           // zero dimensions
      {with(good, 3, 9), ErrorCode::kMalformed},                                           // too many dimensions
      {std::vector<std::uint8_t>(good.begin(), good.begin() + 9), ErrorCode::kMalformed},  // header cut
      {std::vector<std::uint8_t>(good.begin(), good.end() - 1), ErrorCode::kMalformed},    // data cut
      {[&] {
         auto b = good;
         b.push_back(0);
         return b;
       }(),
       ErrorCode::kMalformed},                                                              // trailing byte
      {idx_bytes({0xffffffffu, 0xffffffffu, 0xffffffffu}, {}), ErrorCode::kLimitExceeded},  // overflow
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    auto r = parse_idx(cases[i].bytes, "case.idx");
    ASSERT_FALSE(r.ok()) << "case " << i;
    EXPECT_EQ(r.error().code, cases[i].code) << "case " << i << ": " << r.error().to_string();
    EXPECT_NE(r.error().message.find("case.idx"), std::string::npos) << r.error().message;
  }
}

TEST(ParseIdx, AcceptsAnEmptyArrayAndHonoursTheByteLimit) {
  auto empty = parse_idx(idx_bytes({0, 28, 28}, {}), "empty");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->data.empty());
  IdxLimits limits;
  limits.max_bytes = 11;
  auto big = parse_idx(idx_bytes({3, 4}, iota_bytes(12)), "big", limits);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, ErrorCode::kLimitExceeded);
}

TEST(ReadIdxFile, ReadsPlainAndGzipFilesIdentically) {
  TempDir dir;
  const auto bytes = idx_bytes({5, 4, 3}, iota_bytes(60));
  write_plain(dir.file("a.idx"), bytes);
  write_gzip(dir.file("a.idx.gz"), bytes);
  auto plain = read_idx_file(dir.file("a.idx"));
  auto gz = read_idx_file(dir.file("a.idx.gz"));
  ASSERT_TRUE(plain.ok()) << plain.error().to_string();
  ASSERT_TRUE(gz.ok()) << gz.error().to_string();
  EXPECT_EQ(plain->dims, gz->dims);
  EXPECT_EQ(plain->data, gz->data);
}

TEST(ReadIdxFile, ALimitNearTheLargestSizeMeansNone) {
  TempDir dir;
  write_plain(dir.file("a.idx"), idx_bytes({5, 4, 3}, iota_bytes(60)));
  IdxLimits limits;
  limits.max_bytes = SIZE_MAX;  // the header's bytes on top wrapped the cap around to 19
  auto array = read_idx_file(dir.file("a.idx"), limits);
  ASSERT_TRUE(array.ok()) << array.error().to_string();
  EXPECT_EQ(array->data.size(), 60u);
}

TEST(ReadIdxFile, ReportsMissingTruncatedAndCorruptFilesByName) {
  TempDir dir;
  auto missing = read_idx_file(dir.file("nope.idx"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("nope.idx"), std::string::npos);

  // A gzip stream cut in half, and one whose content is a truncated IDX image.
  const auto bytes = idx_bytes({40, 40}, iota_bytes(1600, 7));
  write_gzip(dir.file("full.gz"), bytes);
  std::ifstream in(dir.file("full.gz"), std::ios::binary);
  std::vector<std::uint8_t> gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write_plain(dir.file("cut.gz"), std::vector<std::uint8_t>(gz.begin(), gz.begin() + static_cast<long>(gz.size() / 2)));
  auto cut = read_idx_file(dir.file("cut.gz"));
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.error().code, ErrorCode::kMalformed);
  EXPECT_NE(cut.error().message.find("cut.gz"), std::string::npos) << cut.error().message;

  write_gzip(dir.file("short.gz"), std::vector<std::uint8_t>(bytes.begin(), bytes.end() - 10));
  auto short_content = read_idx_file(dir.file("short.gz"));
  ASSERT_FALSE(short_content.ok());
  EXPECT_EQ(short_content.error().code, ErrorCode::kMalformed);
  EXPECT_NE(short_content.error().message.find("short.gz"), std::string::npos);

  // Corrupt deflate data behind a valid gzip header.
  auto corrupt = gz;
  for (std::size_t i = 12; i < corrupt.size() - 8; ++i) corrupt[i] ^= 0x5a;
  write_plain(dir.file("corrupt.gz"), corrupt);
  auto bad = read_idx_file(dir.file("corrupt.gz"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kMalformed);

  IdxLimits limits;
  limits.max_bytes = 100;
  auto over = read_idx_file(dir.file("full.gz"), limits);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code, ErrorCode::kLimitExceeded);
}

TEST(LoadIdxDataset, ScalesPixelsAndChecksLabels) {
  TempDir dir;
  write_gzip(dir.file("img.gz"), idx_bytes({3, 2, 2}, {0, 255, 51, 102, 1, 2, 3, 4, 5, 6, 7, 8}));
  write_plain(dir.file("lab"), idx_bytes({3}, {9, 0, 4}));
  auto data = load_idx_dataset(dir.file("img.gz"), dir.file("lab"));
  ASSERT_TRUE(data.ok()) << data.error().to_string();
  EXPECT_EQ(data->size(), 3u);
  EXPECT_EQ(data->num_features, 4u);
  EXPECT_EQ(data->rows, 2u);
  EXPECT_EQ(data->num_classes, 10u);
  EXPECT_FLOAT_EQ(data->features[1], 1.0f);
  EXPECT_FLOAT_EQ(data->features[2], 0.2f);
  EXPECT_EQ(data->labels, (std::vector<std::uint8_t>{9, 0, 4}));

  write_plain(dir.file("lab_bad"), idx_bytes({3}, {9, 10, 4}));
  auto bad_label = load_idx_dataset(dir.file("img.gz"), dir.file("lab_bad"));
  ASSERT_FALSE(bad_label.ok());
  EXPECT_NE(bad_label.error().message.find("lab_bad"), std::string::npos);

  write_plain(dir.file("lab_count"), idx_bytes({2}, {1, 2}));
  auto count = load_idx_dataset(dir.file("img.gz"), dir.file("lab_count"));
  ASSERT_FALSE(count.ok());
  EXPECT_EQ(count.error().code, ErrorCode::kMalformed);

  auto swapped = load_idx_dataset(dir.file("lab"), dir.file("img.gz"));
  ASSERT_FALSE(swapped.ok());
  EXPECT_EQ(swapped.error().code, ErrorCode::kMalformed);

  write_plain(dir.file("img_empty"), idx_bytes({3, 0, 28}, {}));  // images without a pixel
  auto empty = load_idx_dataset(dir.file("img_empty"), dir.file("lab"));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("0 x 28 pixels"), std::string::npos) << empty.error().message;
}

TEST(LoadMnistDir, FindsPlainAndGzipFilesAndNamesTheMissingOne) {
  TempDir dir;
  write_gzip(dir.file("train-images-idx3-ubyte.gz"), idx_bytes({4, 3, 3}, iota_bytes(36)));
  write_plain(dir.file("train-labels-idx1-ubyte"), idx_bytes({4}, {0, 1, 2, 3}));
  write_plain(dir.file("t10k-images.idx3-ubyte"), idx_bytes({2, 3, 3}, iota_bytes(18)));
  auto missing = load_mnist_dir(dir.file(""));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("t10k-labels"), std::string::npos);
  write_gzip(dir.file("t10k-labels-idx1-ubyte.gz"), idx_bytes({2}, {5, 6}));
  auto split = load_mnist_dir(dir.file(""));
  ASSERT_TRUE(split.ok()) << split.error().to_string();
  EXPECT_EQ(split->train.size(), 4u);
  EXPECT_EQ(split->test.size(), 2u);
  EXPECT_EQ(split->test.labels[1], 6);
}

TEST(LoadMnistDir, TrainAndTestImagesOfAnotherShapeAreRefused) {
  TempDir dir;
  // 4×5 and 5×4 images have as many pixels, but a CNN would read the test set with the wrong rows.
  write_plain(dir.file("train-images-idx3-ubyte"), idx_bytes({2, 4, 5}, iota_bytes(40)));
  write_plain(dir.file("train-labels-idx1-ubyte"), idx_bytes({2}, {0, 1}));
  write_plain(dir.file("t10k-images-idx3-ubyte"), idx_bytes({2, 5, 4}, iota_bytes(40)));
  write_plain(dir.file("t10k-labels-idx1-ubyte"), idx_bytes({2}, {1, 0}));
  auto split = load_mnist_dir(dir.file(""));
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.error().code, ErrorCode::kMalformed);
  EXPECT_NE(split.error().message.find("4×5×1 and 5×4×1"), std::string::npos) << split.error().message;
}

TEST(LoadFashionMnist, RealFilesHaveTheirPublishedShape) {
  if (!fs::is_directory(std::string(kDefaultFashionMnistDir))) {
    GTEST_SKIP() << kDefaultFashionMnistDir << " is absent (Debian package dataset-fashion-mnist)";
  }
  auto split = load_fashion_mnist();
  ASSERT_TRUE(split.ok()) << split.error().to_string();
  EXPECT_EQ(split->train.size(), 60000u);
  EXPECT_EQ(split->test.size(), 10000u);
  EXPECT_EQ(split->train.num_features, 784u);
  EXPECT_EQ(split->train.rows, 28u);
  EXPECT_EQ(split->train.cols, 28u);
  // Fashion-MNIST is balanced: 6000 training and 1000 test images per class.
  std::vector<int> train_counts(10, 0), test_counts(10, 0);
  for (auto l : split->train.labels) ++train_counts[l];
  for (auto l : split->test.labels) ++test_counts[l];
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(train_counts[c], 6000);
    EXPECT_EQ(test_counts[c], 1000);
  }
  const auto [lo, hi] = std::minmax_element(split->test.features.begin(), split->test.features.end());
  EXPECT_EQ(*lo, 0.0f);
  EXPECT_EQ(*hi, 1.0f);
}

// ---- synthetic ----------------------------------------------------------------------------------

TEST(Synthetic, IsSeededBalancedAndValidated) {
  SyntheticOptions o;
  o.num_examples = 400;
  o.num_features = 6;
  o.num_classes = 4;
  auto a = make_synthetic(o), b = make_synthetic(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->features, b->features);
  EXPECT_EQ(a->labels, b->labels);
  std::vector<int> counts(4, 0);
  for (auto l : a->labels) ++counts[l];
  for (int c : counts) EXPECT_EQ(c, 100);
  auto test = make_synthetic_test(o, 100);
  ASSERT_TRUE(test.ok());
  EXPECT_NE(std::vector<float>(test->features.begin(), test->features.begin() + 6),
            std::vector<float>(a->features.begin(), a->features.begin() + 6));
  o.seed = 2;
  auto c = make_synthetic(o);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->features, c->features);
  o.num_classes = 1;
  EXPECT_FALSE(make_synthetic(o).ok());
  o.num_classes = 4;
  o.noise = 0.0;
  EXPECT_FALSE(make_synthetic(o).ok());
  o.noise = 1.0;
  o.image_rows = 2;
  o.image_cols = 2;
  EXPECT_FALSE(make_synthetic(o).ok());
  o.image_cols = 3;
  auto image = make_synthetic(o);
  ASSERT_TRUE(image.ok());
  EXPECT_TRUE(image->is_image());
}

TEST(Synthetic, NearestClassMeanSeparatesTheClasses) {
  SyntheticOptions o;
  o.num_examples = 2000;
  o.num_features = 16;
  o.num_classes = 4;
  auto train = make_synthetic(o);
  auto test = make_synthetic_test(o, 1000);
  ASSERT_TRUE(train.ok() && test.ok());
  std::vector<double> means(4 * 16, 0.0);
  for (std::size_t i = 0; i < train->size(); ++i) {
    for (std::size_t f = 0; f < 16; ++f) means[train->labels[i] * 16 + f] += train->features[i * 16 + f] / 500.0;
  }
  std::size_t correct = 0;
  for (std::size_t i = 0; i < test->size(); ++i) {
    double best = 1e300;
    std::size_t arg = 0;
    for (std::size_t c = 0; c < 4; ++c) {
      double d = 0;
      for (std::size_t f = 0; f < 16; ++f) d += std::pow(test->features[i * 16 + f] - means[c * 16 + f], 2);
      if (d < best) best = d, arg = c;
    }
    correct += arg == test->labels[i];
  }
  EXPECT_GT(static_cast<double>(correct) / 1000.0, 0.9);
}

// ---- partitions ---------------------------------------------------------------------------------

TEST(PartitionSampler, PartitionJOfRoundRIsTheSameOnEveryInstance) {
  const PartitionOptions o{77, 32};
  PartitionSampler node_a(o, 60000), node_b(o, 60000);
  // node_b computes other partitions first: the answer must not depend on history.
  for (std::uint64_t j = 0; j < 5; ++j) (void)node_b.indices(3, j);
  std::set<std::vector<std::uint32_t>> distinct;
  for (std::uint64_t round = 0; round < 4; ++round) {
    for (std::uint64_t j = 0; j < 7; ++j) {
      const auto a = node_a.indices(round, j);
      EXPECT_EQ(a, node_b.indices(round, j));
      ASSERT_EQ(a.size(), 32u);
      EXPECT_EQ(std::set<std::uint32_t>(a.begin(), a.end()).size(), 32u) << "distinct within a partition";
      for (auto i : a) EXPECT_LT(i, 60000u);
      distinct.insert(a);
    }
  }
  EXPECT_EQ(distinct.size(), 28u);
  EXPECT_NE(PartitionSampler({78, 32}, 60000).indices(0, 0), node_a.indices(0, 0));
}

TEST(PartitionSampler, DrawsFromTheShardOfThePartitionAndCoversSmallPools) {
  std::vector<std::vector<std::uint32_t>> shards = {{10, 11, 12}, {20, 21, 22, 23, 24}};
  PartitionSampler sampler({5, 3}, shards);
  const auto p0 = sampler.indices(1, 0), p1 = sampler.indices(1, 1), p2 = sampler.indices(1, 2);
  EXPECT_EQ(std::set<std::uint32_t>(p0.begin(), p0.end()), (std::set<std::uint32_t>{10, 11, 12}));
  for (auto i : p1) EXPECT_TRUE(i >= 20 && i <= 24);
  for (auto i : p2) EXPECT_TRUE(i >= 10 && i <= 12);  // partition 2 wraps to shard 0
  PartitionSampler big({5, 10}, shards);              // larger than the shard: with replacement
  const auto q = big.indices(0, 0);
  EXPECT_EQ(q.size(), 10u);
  for (auto i : q) EXPECT_TRUE(i >= 10 && i <= 12);
}

TEST(PartitionSampler, EveryExampleIsEquallyLikely) {
  PartitionSampler sampler({3, 10}, 50);
  std::vector<int> counts(50, 0);
  for (std::uint64_t r = 0; r < 2000; ++r) {
    for (auto i : sampler.indices(r, 0)) ++counts[i];
  }
  // 20000 draws, 400 expected per example, sd ~19.
  for (int c : counts) EXPECT_NEAR(c, 400, 100);
}

// ---- splits -------------------------------------------------------------------------------------

void expect_exact_cover(const std::vector<std::vector<std::uint32_t>>& shards, std::size_t n) {
  std::vector<int> seen(n, 0);
  for (const auto& s : shards) {
    for (auto i : s) {
      ASSERT_LT(i, n);
      ++seen[i];
    }
  }
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "example " << i;
}

TEST(SplitIid, IsABalancedDeterministicPartition) {
  auto a = split_iid(1003, 7, 9), b = split_iid(1003, 7, 9), c = split_iid(1003, 7, 10);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  expect_exact_cover(*a, 1003);
  for (const auto& s : *a) EXPECT_TRUE(s.size() == 143 || s.size() == 144);
  EXPECT_FALSE(split_iid(5, 0, 1).ok());
  EXPECT_FALSE(split_iid(5, 6, 1).ok());
}

double mean_max_class_share(const std::vector<std::vector<std::uint32_t>>& shards,
                            const std::vector<std::uint8_t>& labels, std::size_t classes) {
  double total = 0;
  for (const auto& s : shards) {
    std::vector<double> counts(classes, 0);
    for (auto i : s) ++counts[labels[i]];
    total += *std::max_element(counts.begin(), counts.end()) / static_cast<double>(s.size());
  }
  return total / static_cast<double>(shards.size());
}

TEST(SplitDirichlet, CoversEveryExampleOnceAndSkewsWithSmallAlpha) {
  std::vector<std::uint8_t> labels(5000);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::uint8_t>((i * 7) % 10);
  DirichletOptions o;
  o.alpha = 0.1;
  o.min_per_node = 20;
  o.seed = 4;
  auto skewed = split_dirichlet(labels, 10, 10, o);
  ASSERT_TRUE(skewed.ok()) << skewed.error().to_string();
  expect_exact_cover(*skewed, labels.size());
  for (const auto& s : *skewed) {
    EXPECT_GE(s.size(), 20u);
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
  }
  auto again = split_dirichlet(labels, 10, 10, o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*skewed, *again);

  o.alpha = 1000.0;
  auto flat = split_dirichlet(labels, 10, 10, o);
  ASSERT_TRUE(flat.ok());
  expect_exact_cover(*flat, labels.size());
  // iid-like shards hold ~10% of each class; α = 0.1 concentrates most of a shard on one class.
  EXPECT_LT(mean_max_class_share(*flat, labels, 10), 0.15);
  EXPECT_GT(mean_max_class_share(*skewed, labels, 10), 0.4);
}

TEST(SplitDirichlet, RejectsImpossibleRequests) {
  std::vector<std::uint8_t> labels = {0, 1, 2, 0, 1, 2};
  DirichletOptions o;
  o.min_per_node = 2;
  EXPECT_EQ(split_dirichlet(labels, 3, 4, o).error().code, ErrorCode::kPrecondition);
  o.min_per_node = 1;
  o.alpha = 0.0;
  EXPECT_EQ(split_dirichlet(labels, 3, 2, o).error().code, ErrorCode::kInvalidArgument);
  o.alpha = 1.0;
  EXPECT_EQ(split_dirichlet(labels, 2, 2, o).error().code, ErrorCode::kInvalidArgument);  // label 2
  EXPECT_EQ(split_dirichlet(labels, 3, 0, o).error().code, ErrorCode::kInvalidArgument);
}

class GammaMoments : public ::testing::TestWithParam<double> {};

TEST_P(GammaMoments, MeanAndVarianceEqualTheShape) {
  const double shape = GetParam();
  Rng rng(11, 5);
  const int n = 20000;
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < n; ++i) {
    const double x = sample_gamma(rng, shape);
    ASSERT_GE(x, 0.0);
    sum += x;
    sum_sq += x * x;
  }
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  // Standard error of the mean is sqrt(shape/n); allow 5 of them, and 10% on the variance.
  EXPECT_NEAR(mean, shape, 5 * std::sqrt(shape / n));
  EXPECT_NEAR(var, shape, 0.1 * shape + 0.01);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GammaMoments, ::testing::Values(0.1, 0.5, 1.0, 2.5, 10.0));

}  // namespace
}  // namespace ballot::learning

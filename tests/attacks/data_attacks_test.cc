#include "attacks/data_attacks.h"

#include <gtest/gtest.h>

#include <vector>

namespace ballot::attacks {
namespace {

TEST(FlipLabels, NineMinusYForTenClasses) {
  std::vector<std::uint8_t> labels = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  flip_labels(labels, 10);
  EXPECT_EQ(labels, (std::vector<std::uint8_t>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  flip_labels(labels, 10);  // an involution
  EXPECT_EQ(labels, (std::vector<std::uint8_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(FlipLabels, OtherClassCountsAndOutOfRangeLabels) {
  std::vector<std::uint8_t> binary = {0, 1, 1, 0};
  flip_labels(binary, 2);
  EXPECT_EQ(binary, (std::vector<std::uint8_t>{1, 0, 0, 1}));
  std::vector<std::uint8_t> single = {0, 0};
  flip_labels(single, 1);
  EXPECT_EQ(single, (std::vector<std::uint8_t>{0, 0}));
  std::vector<std::uint8_t> wide = {0, 255, 100};
  flip_labels(wide, 256);
  EXPECT_EQ(wide, (std::vector<std::uint8_t>{255, 0, 155}));
  std::vector<std::uint8_t> beyond = {3, 12, 200};  // ≥ classes: left unchanged, no crash
  flip_labels(beyond, 10);
  EXPECT_EQ(beyond, (std::vector<std::uint8_t>{6, 12, 200}));
  flip_labels(std::span<std::uint8_t>(), 10);
}

TEST(FlipLabels, BatchOverloadLeavesFeaturesAlone) {
  learning::Batch batch;
  batch.num_features = 2;
  batch.features = {0.5f, 1.5f, 2.5f, 3.5f};
  batch.labels = {2, 7};
  flip_labels(batch, 10);
  EXPECT_EQ(batch.labels, (std::vector<std::uint8_t>{7, 2}));
  EXPECT_EQ(batch.features, (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f}));
}

}  // namespace
}  // namespace ballot::attacks

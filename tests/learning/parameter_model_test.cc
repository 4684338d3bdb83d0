#include "learning/parameter_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/enforce.h"
#include "learning/models.h"

namespace ballot::learning {
namespace {

ParameterFile two_layers() {
  ParameterFile file;
  file.tensors = {{"0.weight", {3, 2}}, {"0.bias", {3}}, {"1.weight", {1, 3}}};
  for (std::size_t i = 0; i < 12; ++i) file.values.push_back(static_cast<float>(i) * 0.5f - 2.0f);
  return file;
}

class ParameterModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ballot_parameter_model_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = dir_ / "init.ballot";
    ASSERT_TRUE(write_parameter_file(path_, two_layers()).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  std::filesystem::path path_;
};

TEST_F(ParameterModelTest, MakeModelGivesTheFilesValuesAndLayout) {
  const std::string spec = "init:file=" + path_.string();
  // The shape and seed are ignored.
  auto made = make_model(spec, ModelShape{}, 1234);
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  Model& model = **made;
  EXPECT_EQ(model.spec(), spec);
  EXPECT_EQ(model.num_features(), 0u);
  EXPECT_EQ(model.num_classes(), 0u);
  EXPECT_FALSE(model.has_forward());
  const auto file = two_layers();
  ASSERT_EQ(model.parameters().size(), file.values.size());
  EXPECT_TRUE(std::equal(model.parameters().begin(), model.parameters().end(), file.values.begin()));
  EXPECT_EQ(model.gradients().size(), file.values.size());
  for (float g : model.gradients()) EXPECT_EQ(g, 0.0f);
  ASSERT_EQ(model.layout().num_layers(), 3u);
  EXPECT_EQ(model.layout().layer(0), (LayerSegment{"0.weight", 0, 6}));
  EXPECT_EQ(model.layout().layer(1), (LayerSegment{"0.bias", 6, 3}));
  EXPECT_EQ(model.layout().layer(2), (LayerSegment{"1.weight", 9, 3}));

  const auto& typed = dynamic_cast<const ParameterModel&>(model);
  ASSERT_EQ(typed.tensors().size(), 3u);
  EXPECT_EQ(typed.tensors()[2].shape, (std::vector<std::uint64_t>{1, 3}));
  EXPECT_EQ(typed.layout_digest(), layout_digest(file.tensors));
  EXPECT_EQ(make_model(spec, ModelShape{10, 2, 0, 0, 0}, 7).value()->parameters()[5], file.values[5]);
}

TEST_F(ParameterModelTest, HasNoForwardPass) {
  auto model = make_parameter_model(path_).value();
  std::vector<float> inputs(4), logits(2);
  std::vector<std::uint8_t> labels(2);
  try {
    model->forward(inputs, logits);
    FAIL() << "forward ran";
  } catch (const EnforceError& e) {
    EXPECT_NE(std::string(e.what()).find("has no forward pass"), std::string::npos) << e.what();
  }
  EXPECT_THROW(model->forward_backward(inputs, labels), EnforceError);
  // The built-in models do have one.
  EXPECT_TRUE(make_model("logreg", ModelShape{}, 1).value()->has_forward());
}

TEST_F(ParameterModelTest, CloneCopiesIndependently) {
  auto model = make_parameter_model(path_).value();
  auto copy = model->clone();
  copy->parameters()[0] = 42.0f;
  copy->gradients()[1] = 1.0f;
  EXPECT_EQ(model->parameters()[0], two_layers().values[0]);
  EXPECT_EQ(model->gradients()[1], 0.0f);
  EXPECT_EQ(copy->spec(), model->spec());
  EXPECT_EQ(copy->layout(), model->layout());
  EXPECT_FALSE(copy->has_forward());
}

TEST_F(ParameterModelTest, MissingOrBadFilesAreClearErrors) {
  const std::string missing_spec = "init:file=" + (dir_ / "missing.ballot").string();
  const auto missing = make_model(missing_spec, ModelShape{}, 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("model spec '" + missing_spec + "'"), std::string::npos);
  EXPECT_NE(missing.error().message.find("missing.ballot"), std::string::npos);

  const auto bad_path = dir_ / "bad.ballot";
  std::ofstream(bad_path, std::ios::binary) << "not a parameter file";
  const auto bad = make_model("init:file=" + bad_path.string(), ModelShape{}, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kMalformed);
  EXPECT_NE(bad.error().message.find("magic"), std::string::npos) << bad.error().message;

  EXPECT_EQ(make_model("init", ModelShape{}, 1).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(make_model("init:path=x", ModelShape{}, 1).error().code, ErrorCode::kInvalidArgument);

  // A well-formed file whose values training cannot start from.
  for (const float bad_value : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    auto file = two_layers();
    file.values[7] = bad_value;  // 0.bias, element 1
    const auto path = dir_ / "non-finite.ballot";
    ASSERT_TRUE(write_parameter_file(path, file).ok());
    const auto refused = make_parameter_model(path);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(refused.error().message.find("'0.bias' has a non-finite value at element 1"), std::string::npos)
        << refused.error().message;
  }
}

}  // namespace
}  // namespace ballot::learning

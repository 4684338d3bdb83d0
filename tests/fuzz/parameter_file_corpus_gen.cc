// Writes the seed corpus of the parameter_file fuzz target (tests/fuzz/parameter_file_fuzz.cc):
// small valid Ballot parameter files of a few shapes (a scalar, vectors, a convolution's rank-4
// weight, the rank limit, long names) encoded by encode_parameter_file. Deterministic, so
// `--check` verifies the committed corpus (ctest fuzz_parameter_file_corpus_current).
//   parameter_file_corpus_gen DIR          write the files
//   parameter_file_corpus_gen --check DIR  exit 1 if any file is missing or different
#include <string>
#include <vector>

#include "learning/parameter_file.h"
#include "tests/fuzz/corpus_seeds.h"

namespace {

using namespace ballot;
using fuzzing::CorpusSeed;

CorpusSeed seed(const std::string& name, std::vector<learning::ParameterTensor> tensors) {
  learning::ParameterFile file;
  file.tensors = std::move(tensors);
  std::size_t total = 0;
  for (const auto& tensor : file.tensors) {
    std::size_t elements = 1;
    for (auto dim : tensor.shape) elements *= static_cast<std::size_t>(dim);
    total += elements;
  }
  for (std::size_t i = 0; i < total; ++i) file.values.push_back(static_cast<float>(i % 13) * 0.125f - 0.75f);
  return {name, learning::encode_parameter_file(file).value()};
}

std::vector<CorpusSeed> seeds() {
  return {
      seed("scalar", {{"scale", {}}}),
      seed("linear", {{"fc.weight", {3, 4}}, {"fc.bias", {3}}}),
      seed("conv_linear",
           {{"0.weight", {2, 1, 3, 3}}, {"0.bias", {2}}, {"2.weight", {4, 8}}, {"2.bias", {4}}, {"temperature", {}}}),
      seed("rank8", {{"t", {1, 2, 1, 2, 1, 1, 2, 1}}}),
      seed("long_name", {{std::string(1024, 'n'), {2}}, {"b", {1}}}),
  };
}

}  // namespace

int main(int argc, char** argv) { return fuzzing::write_or_check_corpus(argc, argv, seeds()); }

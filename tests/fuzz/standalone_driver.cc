// A main() for fuzz targets when libFuzzer is not available (GCC builds): replays every file of
// the corpus directories given, then runs --mutations=N deterministic random mutations of them
// (bit flips, truncations, insertions, byte splices), so every build exercises the decoders on
// hostile bytes. The real coverage-guided fuzzing runs with clang (the `fuzz` preset).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::uint64_t next_random(std::uint64_t& state) {  // xorshift64*: deterministic, dependency-free
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545F4914F6CDD1Dull;
}

std::vector<std::uint8_t> mutate(std::vector<std::uint8_t> input, std::uint64_t& state) {
  const int edits = 1 + static_cast<int>(next_random(state) % 8);
  for (int e = 0; e < edits; ++e) {
    const std::uint64_t r = next_random(state);
    const std::size_t at = input.empty() ? 0 : r % input.size();
    switch ((r >> 32) % 5) {
      case 0:  // flip a bit
        if (!input.empty()) input[at] ^= static_cast<std::uint8_t>(1u << ((r >> 40) % 8));
        break;
      case 1:  // set a byte to an interesting value
        if (!input.empty()) {
          static constexpr std::uint8_t kValues[] = {0x00, 0xff, 0x7f, 0x80, 0x01, 0xfe};
          input[at] = kValues[(r >> 40) % sizeof(kValues)];
        }
        break;
      case 2:  // truncate
        input.resize(at);
        break;
      case 3:  // insert random bytes
        input.insert(input.begin() + static_cast<std::ptrdiff_t>(at), 1 + (r >> 40) % 16,
                     static_cast<std::uint8_t>(r >> 48));
        break;
      case 4:  // overwrite 4 bytes with a random 32-bit value (lengths, counts)
        if (input.size() >= 4) {
          const std::size_t start = at > input.size() - 4 ? input.size() - 4 : at;
          const std::uint32_t value = static_cast<std::uint32_t>(next_random(state));
          std::memcpy(input.data() + start, &value, 4);
        }
        break;
    }
  }
  return input;
}

}  // namespace

int main(int argc, char** argv) {
  long mutations = 0;
  std::vector<std::vector<std::uint8_t>> corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--mutations=", 0) == 0) {
      mutations = std::strtol(arg.c_str() + 12, nullptr, 10);
      continue;
    }
    // A corpus that moved or emptied must fail the replay, not pass it with nothing to replay.
    const std::filesystem::path path(arg);
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(path)) {
      for (const auto& entry : std::filesystem::directory_iterator(path)) files.push_back(entry.path());
      if (files.empty()) {
        std::fprintf(stderr, "corpus directory %s is empty\n", arg.c_str());
        return 1;
      }
    } else if (std::filesystem::is_regular_file(path)) {
      files.push_back(path);
    } else {
      std::fprintf(stderr, "no corpus at %s\n", arg.c_str());
      return 1;
    }
    for (const auto& file : files) {
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "cannot read %s\n", file.string().c_str());
        return 1;
      }
      corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  if (corpus.empty()) corpus.emplace_back();
  for (const auto& input : corpus) LLVMFuzzerTestOneInput(input.data(), input.size());
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  for (long m = 0; m < mutations; ++m) {
    const auto input = mutate(corpus[next_random(state) % corpus.size()], state);
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::printf("replayed %zu corpus inputs and %ld mutations\n", corpus.size(), mutations);
  return 0;
}

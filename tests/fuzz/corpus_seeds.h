// The shared main of the seed-corpus generators (tests/transport/frame_corpus_gen.cc,
// tests/coding/codec_corpus_gen.cc): `GEN DIR` writes every seed into DIR; `GEN --check DIR`
// compares DIR with the seeds the current code makes and fails on a missing or stale file, so a
// wire-format change cannot leave the committed corpus behind (a ctest runs --check).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace ballot::fuzzing {

struct CorpusSeed {
  std::string file_name;
  std::vector<std::uint8_t> bytes;
};

inline int write_or_check_corpus(int argc, char** argv, const std::vector<CorpusSeed>& seeds) {
  const bool check = argc == 3 && std::strcmp(argv[1], "--check") == 0;
  // DIR is never an option: `GEN --help` prints the usage instead of writing a directory "--help".
  if ((argc != 2 && !check) || argv[argc - 1][0] == '-') {
    const bool help = argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0);
    std::fprintf(help ? stdout : stderr, "usage: %s [--check] DIR\n", argv[0]);
    return help ? 0 : 2;
  }
  const std::filesystem::path dir = argv[argc - 1];
  if (!check) std::filesystem::create_directories(dir);
  int bad = 0;
  for (const auto& seed : seeds) {
    const auto path = dir / seed.file_name;
    if (check) {
      std::ifstream in(path, std::ios::binary);
      const std::vector<std::uint8_t> have((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (have != seed.bytes) {
        std::fprintf(stderr, "corpus file %s is missing or stale\n", path.c_str());
        ++bad;
      }
      continue;
    }
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(seed.bytes.data()), static_cast<std::streamsize>(seed.bytes.size()));
  }
  return bad == 0 ? 0 : 1;
}

}  // namespace ballot::fuzzing

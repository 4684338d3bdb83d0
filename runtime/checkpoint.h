// Checkpoints: the state a training run needs to resume (model, optimizer, error-feedback memory,
// round number), as named byte sections in one self-checking file.
//
// Format (little-endian): "BALLOTCK" | version u32 | round u64 | section count u32 |
// per section: name length u16 | name | data length u64 | data | SHA-256 of all preceding bytes.
// The same bytes travel to a restarting node, so decoding treats them as hostile: every length is
// checked against the remaining bytes and the limits before anything is allocated, and the digest
// must match. save_checkpoint writes a temporary file in the same directory, fsyncs it and renames
// it over the old one, so a crash leaves either the old or the new checkpoint, never a torn one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "core/result.h"

namespace ballot::runtime {

inline constexpr std::uint32_t kCheckpointVersion = 1;

struct CheckpointLimits {
  std::uint32_t max_sections = 64;
  std::size_t max_name_length = 256;
  std::uint64_t max_total_bytes = std::uint64_t{4} << 30;
};

struct Checkpoint {
  std::uint64_t round = 0;
  std::map<std::string, std::vector<std::uint8_t>> sections;

  bool operator==(const Checkpoint&) const = default;
};

std::vector<std::uint8_t> encode_checkpoint(const Checkpoint& checkpoint);
// kMalformed for anything that is not a complete, intact checkpoint; kLimitExceeded past limits.
Result<Checkpoint> decode_checkpoint(std::span<const std::uint8_t> bytes, const CheckpointLimits& limits = {});

Status save_checkpoint(const std::filesystem::path& path, const Checkpoint& checkpoint);
// kNotFound when the file does not exist; other errors name the path and the problem.
Result<Checkpoint> load_checkpoint(const std::filesystem::path& path, const CheckpointLimits& limits = {});

}  // namespace ballot::runtime

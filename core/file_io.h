// Whole files of Ballot's own formats (checkpoints, decision logs, signed records, parameter
// files), read in one piece before their decoder sees them — the size is checked against the
// caller's limit before anything is allocated — and replaced atomically. Every error names the
// file.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace ballot {

// The bytes of `path`. kNotFound when it does not exist ("no <what> at '<path>'"), kLimitExceeded
// when it holds more than `max_bytes`, kIo (with the system's reason) when it cannot be read.
Result<std::vector<std::uint8_t>> read_file(const std::filesystem::path& path, std::uint64_t max_bytes,
                                            std::string_view what);

// What write_file_atomically does with a file already at the path.
enum class IfExists {
  kReplace,  // rename over it
  kRefuse,   // kInvalidArgument "refusing to overwrite existing file" (keys, certificates)
};

// Writes `path` atomically: a temporary file beside it of a fresh name, created exclusively (its
// directory is created if needed), is written, fsynced and renamed over it (kReplace) or linked to
// it (kRefuse), and the directory is fsynced, so after a crash the path holds the old file (or none)
// or the whole new one; on an error the temporary file is removed, and one a killed writer left is
// removed by the next write once it is ten minutes old. `mode`: the new file's permissions, exactly
// (not reduced by the umask).
Status write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes, mode_t mode = 0600,
                             IfExists if_exists = IfExists::kReplace);

}  // namespace ballot

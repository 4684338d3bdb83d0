#include "attacks/data_attacks.h"

namespace ballot::attacks {

void flip_labels(std::span<std::uint8_t> labels, std::size_t classes) {
  for (auto& y : labels)
    if (y < classes) y = static_cast<std::uint8_t>(classes - 1 - y);
}

}  // namespace ballot::attacks

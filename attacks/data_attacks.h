// Data-domain attacks (ALGORITHMS.md §6): the Byzantine worker trains honestly on poisoned data.
//
//   label_flip   y ↦ classes − 1 − y   (9 − y for the 10 classes of (Fashion-)MNIST)
//
// O(size); deterministic; reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "learning/dataset.h"

namespace ballot::attacks {

// In place. Labels ≥ classes (which a validated Dataset never holds) are left unchanged.
void flip_labels(std::span<std::uint8_t> labels, std::size_t classes);
inline void flip_labels(learning::Batch& batch, std::size_t classes) {
  flip_labels(std::span<std::uint8_t>(batch.labels), classes);
}

}  // namespace ballot::attacks

#include "kernels/float_entries.h"

#include <algorithm>

#include "core/enforce.h"
#include "kernels/detail/cpu_kernels.h"

namespace ballot::kernels {

void append_entries(std::span<const float> x, std::vector<std::uint32_t>& out) {
  BALLOT_ENFORCE_LE(x.size(), std::size_t{1} << 32);
  const auto& kern = detail::active_kernels();
  // In pieces of 8192 coordinates: the output grows by at most a piece, then shrinks to its count.
  std::size_t count = out.size();
  for (std::size_t begin = 0; begin < x.size(); begin += 8192) {
    const std::size_t end = std::min(x.size(), begin + 8192);
    out.resize(count + (end - begin));
    count += kern.entries(x.data(), begin, end, out.data() + count);
  }
  out.resize(count);
}

std::size_t count_entries(std::span<const float> x) {
  return detail::active_kernels().count_entries(x.data(), x.size());
}

}  // namespace ballot::kernels

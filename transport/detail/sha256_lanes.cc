#include "transport/detail/sha256_lanes.h"

#include <algorithm>
#include <cstring>

#include "core/enforce.h"
#include "kernels/isa.h"

#if defined(__x86_64__)
// GCC 12 warns about the deliberately undefined vectors inside its own AVX-512 intrinsics (clang
// has no such warning).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define BALLOT_X86 1
#endif

namespace ballot::transport::detail {

namespace {

#if BALLOT_X86

alignas(16) constexpr std::uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr std::uint32_t kInitialState[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                            0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

#define BALLOT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline

template <int N>
BALLOT_AVX512 __m512i ror(__m512i x) {
  return _mm512_ror_epi32(x, N);
}
BALLOT_AVX512 __m512i xor3(__m512i a, __m512i b, __m512i c) { return _mm512_ternarylogic_epi32(a, b, c, 0x96); }
BALLOT_AVX512 __m512i add(__m512i a, __m512i b) { return _mm512_add_epi32(a, b); }

// W[t] for 16 lanes from one 64-byte block of each: a 16x16 transpose of 32-bit words
// (unpack 32, unpack 64, two 128-bit shuffles), then big-endian to native.
BALLOT_AVX512 void load_transposed(const std::uint8_t* const* p, std::size_t offset, __m512i (&w)[16]) {
  __m512i r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(p[i] + offset);
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // r[4i + j], 128-bit chunk k: word 4k + j of rows 4i .. 4i + 3.
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  const __m512i byteswap = _mm512_broadcast_i32x4(_mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3));
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512i v0 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x88), v1 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xDD);
    const __m512i v2 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x88),
                  v3 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xDD);
    w[j] = _mm512_shuffle_epi8(_mm512_shuffle_i32x4(v0, v2, 0x88), byteswap);
    w[4 + j] = _mm512_shuffle_epi8(_mm512_shuffle_i32x4(v1, v3, 0x88), byteswap);
    w[8 + j] = _mm512_shuffle_epi8(_mm512_shuffle_i32x4(v0, v2, 0xDD), byteswap);
    w[12 + j] = _mm512_shuffle_epi8(_mm512_shuffle_i32x4(v1, v3, 0xDD), byteswap);
  }
}

// FIPS 180-4 section 6.2.2 on 16 lanes at once, one lane per 32-bit element: the plain scalar
// algorithm with AVX-512 rotates and three-input logic (Ch = 0xCA, Maj = 0xE8, xor3 = 0x96).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void compress_x16(__m512i (&state)[8],
                                                                       const std::uint8_t* const* p,
                                                                       std::size_t blocks) {
  for (std::size_t block = 0; block < blocks; ++block) {
    __m512i w[16];
    load_transposed(p, 64 * block, w);
    __m512i s[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) s[i] = state[i];
#pragma GCC unroll 64
    for (int t = 0; t < 64; ++t) {
      if (t >= 16) {
        const __m512i w15 = w[(t - 15) & 15], w2 = w[(t - 2) & 15];
        const __m512i s0 = xor3(ror<7>(w15), ror<18>(w15), _mm512_srli_epi32(w15, 3));
        const __m512i s1 = xor3(ror<17>(w2), ror<19>(w2), _mm512_srli_epi32(w2, 10));
        w[t & 15] = add(add(w[t & 15], s0), add(w[(t - 7) & 15], s1));
      }
      // Registers rotate instead of moving: at round t, a = s[(8 - t) & 7], b = s[(9 - t) & 7], ...
      __m512i& a = s[(64 - t) & 7];
      __m512i& b = s[(65 - t) & 7];
      __m512i& c = s[(66 - t) & 7];
      __m512i& d = s[(67 - t) & 7];
      __m512i& e = s[(68 - t) & 7];
      __m512i& f = s[(69 - t) & 7];
      __m512i& g = s[(70 - t) & 7];
      __m512i& h = s[(71 - t) & 7];
      const __m512i t1 =
          add(add(add(h, xor3(ror<6>(e), ror<11>(e), ror<25>(e))), _mm512_ternarylogic_epi32(e, f, g, 0xCA)),
              add(w[t & 15], _mm512_set1_epi32(static_cast<int>(kRoundConstants[t]))));
      const __m512i t2 = add(xor3(ror<2>(a), ror<13>(a), ror<22>(a)), _mm512_ternarylogic_epi32(a, b, c, 0xE8));
      d = add(d, t1);
      h = add(t1, t2);  // the new a: h's register becomes a in the next round
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) state[i] = add(state[i], s[i]);
  }
}

// SHA-256 of count <= 16 messages of `length` bytes each; unused lanes repeat message 0.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void hash_x16(const std::uint8_t* const* messages,
                                                                   std::size_t count, std::size_t length, Digest* out) {
  const std::uint8_t* p[16];
  for (std::size_t l = 0; l < 16; ++l) p[l] = messages[l < count ? l : 0];
  __m512i state[8];
  for (int i = 0; i < 8; ++i) state[i] = _mm512_set1_epi32(static_cast<int>(kInitialState[i]));
  const std::size_t full = length / 64;
  compress_x16(state, p, full);

  // FIPS 180-4 padding: the rest, 0x80, zeros, the bit length big-endian; one or two blocks.
  const std::size_t rest = length % 64;
  const std::size_t tail_blocks = rest + 9 <= 64 ? 1 : 2;
  alignas(64) std::uint8_t tail[16][128];
  const std::uint64_t bits = static_cast<std::uint64_t>(length) * 8;
  for (std::size_t l = 0; l < 16; ++l) {
    std::memset(tail[l], 0, sizeof(tail[l]));
    if (rest > 0) std::memcpy(tail[l], p[l] + 64 * full, rest);
    tail[l][rest] = 0x80;
    for (std::size_t i = 0; i < 8; ++i) tail[l][64 * tail_blocks - 1 - i] = static_cast<std::uint8_t>(bits >> (8 * i));
    p[l] = tail[l];
  }
  compress_x16(state, p, tail_blocks);

  alignas(64) std::uint32_t words[8][16];
  for (int i = 0; i < 8; ++i) _mm512_store_si512(words[i], state[i]);
  for (std::size_t l = 0; l < count; ++l)
    for (std::size_t i = 0; i < 8; ++i)
      for (std::size_t b = 0; b < 4; ++b) out[l][4 * i + b] = static_cast<std::uint8_t>(words[i][l] >> (24 - 8 * b));
}

#endif  // BALLOT_X86

}  // namespace

bool sha256_x16_available() {
#if BALLOT_X86
  // kernels/isa.h's kAvx512 level includes the F, BW and VL this kernel is compiled for.
  return kernels::active_isa() == kernels::Isa::kAvx512;
#else
  return false;
#endif
}

void sha256_x16(const std::uint8_t* const* messages, std::size_t count, std::size_t length, Digest* out) {
  BALLOT_ENFORCE(count >= 1 && count <= kSha256Lanes, "sha256_x16: 1 to 16 messages");
  BALLOT_ENFORCE(sha256_x16_available(), "sha256_x16 needs AVX-512");
#if BALLOT_X86
  hash_x16(messages, count, length, out);
#endif
}

void sha256_equal_length(const std::uint8_t* const* messages, std::size_t count, std::size_t length, Digest* out) {
  std::size_t i = 0;
  if (sha256_x16_available()) {
    // A group of fewer than kSha256MinLanes costs as much as 16 and loses to SHA-NI one by one.
    while (count - i >= kSha256MinLanes) {
      const std::size_t n = std::min(kSha256Lanes, count - i);
      hash_x16(messages + i, n, length, out + i);
      i += n;
    }
  }
  for (; i < count; ++i) out[i] = sha256(ByteSpan(messages[i], length));
}

}  // namespace ballot::transport::detail

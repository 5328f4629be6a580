// The indexer's dot products on the tile unit (see index_scores.h for why the bits equal the
// reference steps'): per 16 entries, C[16 heads][16 entries] += A[16 heads][32 dims] ·
// B[16 dim pairs][16 entries][2], with A the query row in bf16 and B the entries' bf16 key rows
// transposed into dim pairs (a 16×16 transpose of 32-bit words per 32 dims, in registers). The
// epilogue then takes the reference's rounding steps with the 16 entries in the lanes, heads in order.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "backend/cpu/amx_tiles.h"
#include "backend/cpu/index_scores.h"
#include "cache/row_pool.h"

// GCC 12 flags the intentionally undefined lanes inside its own AVX-512 intrinsics.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace dsv4::cpu {

namespace {

// round_bf16 on 16 lanes (ties to even; NaN → quiet NaN), as round_bf16_x8.
inline __m512 round_bf16_x16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i hi = _mm512_set1_epi32(int32_t(0xFFFF0000u));
  const __m512i r = _mm512_and_si512(
      _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF),
                                           _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)))),
      hi);
  const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                                   _mm512_set1_epi32(0x7F800000));
  return _mm512_castsi512_ps(
      _mm512_mask_or_epi32(r, is_nan, _mm512_and_si512(u, hi), _mm512_set1_epi32(0x00400000)));
}

// Transposes 16 rows of 16 words: stage d swaps the off-diagonal d×d blocks, element (i, j) with
// (i+d, j−d) for i without bit d and j with it.
struct TransposeIndex {
  alignas(64) int32_t a[4][16], b[4][16];
  TransposeIndex() {
    for (int s = 0, d = 8; d >= 1; ++s, d >>= 1)
      for (int j = 0; j < 16; ++j) {
        a[s][j] = (j & d) ? 16 + j - d : j;
        b[s][j] = (j & d) ? 16 + j : j + d;
      }
  }
};
const TransposeIndex kTranspose;

inline void transpose16(__m512i r[16]) {
  for (int s = 0, d = 8; d >= 1; ++s, d >>= 1) {
    const __m512i va = _mm512_load_si512(kTranspose.a[s]), vb = _mm512_load_si512(kTranspose.b[s]);
    for (int i = 0; i < 16; ++i)
      if (!(i & d)) {
        const __m512i a = r[i], b = r[i + d];
        r[i] = _mm512_permutex2var_epi32(a, va, b);
        r[i + d] = _mm512_permutex2var_epi32(a, vb, b);
      }
  }
}

// Keys of 16 entries (rows of `dim` bf16 words) into B tiles bt[dim/32][16 pairs][16 entries],
// with E and L (see dot_is_exact) of each 32-value block over the 16 entries. False when a value
// has more than two significant bits or is subnormal, infinite or NaN.
bool load_key_tile(const uint16_t* const rows[16], int64_t dim, uint32_t* bt, int32_t* hi, int32_t* lo) {
  const __m512i magnitude = _mm512_set1_epi16(0x7FFF), field = _mm512_set1_epi16(0xFF);
  const __m512i low_bits = _mm512_set1_epi16(0x3F), zero = _mm512_setzero_si512();
  __mmask32 bad = 0;
  for (int64_t kc = 0; kc < dim / 32; ++kc) {
    __m512i r[16], vhi = _mm512_set1_epi16(-1), vlo = _mm512_set1_epi16(0x7FFF);
    for (int n = 0; n < 16; ++n) {
      r[n] = _mm512_loadu_si512(rows[n] + kc * 32);
      const __mmask32 nonzero = _mm512_test_epi16_mask(r[n], magnitude);
      const __m512i e = _mm512_and_si512(_mm512_srli_epi16(r[n], 7), field);
      const __m512i l = _mm512_sub_epi16(e, _mm512_and_si512(_mm512_srli_epi16(r[n], 6), _mm512_set1_epi16(1)));
      vhi = _mm512_mask_max_epi16(vhi, nonzero, vhi, e);
      vlo = _mm512_mask_min_epi16(vlo, nonzero, vlo, l);
      bad |= nonzero & (_mm512_test_epi16_mask(r[n], low_bits) | _mm512_cmpeq_epi16_mask(e, zero) |
                        _mm512_cmpeq_epi16_mask(e, field));
    }
    transpose16(r);
    for (int p = 0; p < 16; ++p) _mm512_store_si512(bt + (kc * 16 + p) * 16, r[p]);
    alignas(64) int16_t h[32], l[32];
    _mm512_store_si512(h, vhi);
    _mm512_store_si512(l, vlo);
    int mh = -1, ml = 0x7FFF;
    for (int i = 0; i < 32; ++i) {
      mh = std::max<int>(mh, h[i]);
      ml = std::min<int>(ml, l[i]);
    }
    hi[kc] = mh < 0 ? kEmptyHi : mh - 127;
    lo[kc] = mh < 0 ? kEmptyLo : ml - 127;
  }
  return bad == 0;
}

// C tiles 0..3 hold four head groups; A goes through tiles 4/5, B through tile 6.
inline void zero_c(int groups) {
  _tile_zero(0);
  if (groups > 1) _tile_zero(1);
  if (groups > 2) _tile_zero(2);
  if (groups > 3) _tile_zero(3);
}

inline void dot_group(int g, const uint16_t* a, int64_t lda_bytes) {
  if (g & 1) {
    _tile_loadd(5, a, lda_bytes);
  } else {
    _tile_loadd(4, a, lda_bytes);
  }
  switch (g) {
    case 0: _tile_dpbf16ps(0, 4, 6); break;
    case 1: _tile_dpbf16ps(1, 5, 6); break;
    case 2: _tile_dpbf16ps(2, 4, 6); break;
    default: _tile_dpbf16ps(3, 5, 6); break;
  }
}

inline void store_c(int groups, float* c) {  // c[4 groups][16 heads][16 entries]
  _tile_stored(0, c, 64);
  if (groups > 1) _tile_stored(1, c + 256, 64);
  if (groups > 2) _tile_stored(2, c + 512, 64);
  if (groups > 3) _tile_stored(3, c + 768, 64);
}

}  // namespace

int64_t index_scores_amx(const IndexQuery& q, const RowTable& keys, int64_t t0, int64_t t1, float* score) {
  const int64_t ih = q.heads, id = q.dim, blocks = id / 32;
  const int log2_dim = std::bit_width(uint64_t(id - 1));
  configure_tiles();
  alignas(64) uint32_t bt[1024 / 32 * 256];  // B tiles of 16 entries
  alignas(64) float c[4 * 256];              // C of four head groups: [head][entry]
  alignas(64) static const uint16_t zero_row[1024] = {};
  int32_t key_hi[1024 / 32], key_lo[1024 / 32];
  bool exact[256];
  std::vector<float> keys_f32;
  int64_t rejected = 0;
  for (int64_t t = t0; t < t1; t += 16) {
    const int64_t n = std::min<int64_t>(16, t1 - t);
    const uint16_t* rows[16];
    for (int64_t j = 0; j < 16; ++j)
      rows[j] = j < n ? reinterpret_cast<const uint16_t*>(keys.row(t + j)) : zero_row;
    if (!load_key_tile(rows, id, bt, key_hi, key_lo)) {  // keys the check cannot vouch for
      keys_f32.resize(size_t(n * id));
      for (int64_t j = 0; j < n * id; ++j) {
        const uint32_t u = uint32_t(rows[j / id][j % id]) << 16;
        std::memcpy(&keys_f32[size_t(j)], &u, 4);
      }
      index_scores(q.q, q.w, ih, id, keys_f32.data(), 0, n, score + t);
      rejected += ih * n;
      continue;
    }
    // Which heads' dot products are exact: the bound over all blocks at once, 16 heads at a time,
    // then block by block for heads it does not clear.
    int key_hi_all = kEmptyHi, key_lo_all = kEmptyLo;
    for (int64_t b = 0; b < blocks; ++b) {
      key_hi_all = std::max(key_hi_all, key_hi[b]);
      key_lo_all = std::min(key_lo_all, key_lo[b]);
    }
    for (int64_t h = 0; h < ih; h += 16) {
      const __m512i hi = _mm512_add_epi32(_mm512_loadu_si512(&q.hi_all[size_t(h)]), _mm512_set1_epi32(key_hi_all));
      const __m512i lo = _mm512_add_epi32(_mm512_loadu_si512(&q.lo_all[size_t(h)]), _mm512_set1_epi32(key_lo_all));
      const __mmask16 none = _mm512_cmplt_epi32_mask(hi, _mm512_set1_epi32(-2048)) |
                             _mm512_cmpgt_epi32_mask(lo, _mm512_set1_epi32(2048));
      const __mmask16 wide = _mm512_cmpgt_epi32_mask(_mm512_sub_epi32(hi, lo), _mm512_set1_epi32(22 - log2_dim)) |
                             _mm512_cmplt_epi32_mask(lo, _mm512_set1_epi32(-126)) |
                             _mm512_cmpgt_epi32_mask(hi, _mm512_set1_epi32(125 - log2_dim));
      const unsigned unclear = wide & ~none;
      for (int j = 0; j < 16; ++j) {
        exact[h + j] = true;
        if (!(unclear >> j & 1)) continue;
        int bhi = 2 * kEmptyHi, blo = 2 * kEmptyLo;
        for (int64_t b = 0; b < blocks; ++b) {
          bhi = std::max(bhi, q.hi[size_t(b * ih + h + j)] + key_hi[b]);
          blo = std::min(blo, q.lo[size_t(b * ih + h + j)] + key_lo[b]);
        }
        exact[h + j] = dot_is_exact(bhi, blo, id);
      }
    }
    __m512 total = _mm512_setzero_ps();
    for (int64_t h0 = 0; h0 < ih; h0 += 64) {  // four head groups of 16 at a time
      const int groups = int(std::min<int64_t>(4, (ih - h0) / 16));
      zero_c(groups);
      for (int64_t kc = 0; kc < blocks; ++kc) {
        _tile_loadd(6, bt + kc * 256, 64);
        for (int g = 0; g < groups; ++g) dot_group(g, q.bf16.data() + (h0 + g * 16) * id + kc * 32, id * 2);
      }
      store_c(groups, c);
      for (int64_t h = 0; h < groups * 16; ++h) {
        if (!exact[h0 + h]) {
          rejected += n;
          for (int64_t j = 0; j < n; ++j) c[h * 16 + j] = reference_dot(q.q + (h0 + h) * id, rows[j], id);
        }
        // The reference's steps per head, in head order, 16 entries in the lanes.
        const __m512 s = _mm512_max_ps(_mm512_setzero_ps(), round_bf16_x16(_mm512_load_ps(c + h * 16)));
        total = _mm512_add_ps(total, round_bf16_x16(_mm512_mul_ps(s, _mm512_set1_ps(q.w[h0 + h]))));
      }
    }
    _mm512_mask_storeu_ps(score + t, __mmask16((1u << n) - 1), round_bf16_x16(total));
  }
  return rejected;
}

}  // namespace dsv4::cpu

// The loop nest shared by the SIMD product kernels. Included by each ISA's translation unit
// inside its own anonymous namespace (the file is compiled once per instruction set: it
// must stay free of std:: templates, whose out-of-line copies the linker could share
// between the AVX-512 and the AVX2 objects).
//
// A kernel provides
//   static constexpr int kMaxRows;               // rows per tile at most (2 or 4)
//   static constexpr int features(int rows);     // outputs per tile for that many rows (divides 8)
//   template <int F, int R> static void tile(const PreparedInput&, const WeightView&,
//                                            int64_t m, int64_t r0, float* out /* [F][R] */);
// and computes each (output, row) pair with the same operations whatever F and R are.
// A kernel may also split tile() into K blocks, for tiles of several rows:
//   static constexpr int64_t kKBlock;             // columns per block (a multiple of its step)
//   template <int F, int R> struct Sums;          // its accumulators, zeroed by value-initialisation
//   template <int F, int R> static void tile_part(const PreparedInput&, const WeightView&, int64_t m,
//                                                 int64_t r0, int64_t k0, int64_t k1, Sums<F, R>&);
//   template <int F, int R> static void finish(const Sums<F, R>&, float* out /* [F][R] */);
// The same operations in the same order per pair: only the order between pairs changes.
//
// Loops: rows in blocks whose activations stay in the L2 cache; outputs in groups of 8
// whose weights stay in L1/L2 while the block's rows pass over them in tiles of ≤ kMaxRows.
// Weights are thus read from memory once per row block (once for any decode or verify step).
// (The FP8 kernels use drive_fp8_nest, that also rescales the activations per 128-row
// weight tile.)

inline float driver_round_bf16(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    u = (u & 0xFFFF0000u) | 0x00400000u;  // quiet NaN, as f32_to_bf16
  } else {
    u += 0x7FFFu + ((u >> 16) & 1u);
    u &= 0xFFFF0000u;
  }
  __builtin_memcpy(&f, &u, 4);
  return f;
}

// 2^(b-127) for an E8M0 byte (0xFF: NaN; 0: the subnormal 2^-127), as e8m0_to_f32.
inline float driver_e8m0(uint8_t b) {
  const uint32_t u = b == 0xFF ? 0x7FC00000u : b == 0 ? 0x00400000u : uint32_t(b) << 23;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

// The multiplier of 128×128 weight tile (tile, b): E8M0 for FP8, an F32 for FP8F (the FP8 kernels
// fold it into the activations: exact for a power of two, one f32 rounding per activation otherwise).
inline float driver_tile_scale(const WeightView& w, int64_t tile, int64_t b) {
  if (w.format != WeightFormat::FP8F) return driver_e8m0(w.scale[tile * w.scale_cols + b]);
  float s;
  __builtin_memcpy(&s, w.scale + (tile * w.scale_cols + b) * 4, 4);
  return s;
}

// The 4-bit formats share one kernel shape (FourBit<format> in each instruction set's file): codes
// two per byte, the low nibble the even column; one scale per block of 2^shift columns of a row.
//   FP4 (MXFP4): e2m1 × E8M0 per 32.   NVFP4: e2m1 × (E4M3 × the global scale) per 16.
//   INT4 (W4A16): (q − 8) × BF16 per 128.
constexpr int four_bit_shift(WeightFormat f) { return f == WeightFormat::NVFP4 ? 4 : f == WeightFormat::INT4 ? 7 : 5; }
constexpr int four_bit_scale_bytes(WeightFormat f) { return f == WeightFormat::INT4 ? 2 : 1; }
// Whether `w` has the geometry the 4-bit kernels need (whole 128-column activation blocks).
inline bool four_bit_fits(const WeightView& w) {
  return w.cols % 128 == 0 && w.scale_cols == (w.cols >> four_bit_shift(w.format));
}

#ifdef __AVX512F__
// 16 E8M0 bytes → 16 floats 2^(b-127) (0 → 2^-127, 0xFF → NaN), as driver_e8m0 (AVX-512 kernels).
inline __m512 e8m0x16(__m128i bytes) {
  const __m512i d = _mm512_cvtepu8_epi32(bytes);
  __m512i v = _mm512_slli_epi32(d, 23);
  v = _mm512_mask_mov_epi32(v, _mm512_cmpeq_epi32_mask(d, _mm512_setzero_si512()), _mm512_set1_epi32(0x00400000));
  v = _mm512_mask_mov_epi32(v, _mm512_cmpeq_epi32_mask(d, _mm512_set1_epi32(0xFF)), _mm512_set1_epi32(0x7FC00000));
  return _mm512_castsi512_ps(v);
}

// 16 block scales of a 4-bit weight row from scale index g on (masked: nb < 16 at a row's end).
template <WeightFormat kF>
inline __m512 four_bit_scales16(const WeightView& w, const uint8_t* row_scales, int64_t g, __mmask16 m) {
  if constexpr (kF == WeightFormat::FP4) {
    return e8m0x16(_mm_maskz_loadu_epi8(m, row_scales + g));
  } else if constexpr (kF == WeightFormat::NVFP4) {  // e4m3 → f16 (× 2^-8, exact) → f32, × 2^8 · global
    __m256i h = _mm256_cvtepi8_epi16(_mm_maskz_loadu_epi8(m, row_scales + g));
    h = _mm256_and_si256(_mm256_slli_epi16(h, 7), _mm256_set1_epi16(int16_t(0xBFFF)));
    return _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f * w.global_scale));
  } else {  // INT4: bf16
    const __m256i h = _mm256_maskz_loadu_epi16(m, row_scales + 2 * g);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}
#endif

// Software prefetch of the weights kPrefetchTiles tiles ahead: a tile reads F rows in step, each
// a short stream (a few KB) that the hardware prefetchers, which stop at 4 KiB pages, pick up
// late. Each tile therefore touches, line for line as it consumes its rows, the same offsets
// kPrefetchTiles·F rows further on (rows are contiguous in all formats), into L2. Measured on
// Zen 4 (gemm_bench): one tile ahead into L1 reaches ~60% of the read bandwidth, four tiles
// ahead into L2 ~95-100%.
constexpr int kPrefetchTiles = 4;
inline void prefetch_line(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1); }

template <class Kern>
constexpr int64_t k_block_of() {
  if constexpr (requires { Kern::kKBlock; }) return Kern::kKBlock;
  else return 0;
}

template <class Kern, int R>
void drive_group(const PreparedInput& in, const WeightView& w, int64_t m, int64_t m_end, int64_t r0, float* y,
                 int64_t ldy, bool round) {
  constexpr int F = Kern::features(R);
  float out[F * R];
  auto store = [&](int64_t at, int features) {
    for (int r = 0; r < R; ++r)
      for (int f = 0; f < features; ++f) {
        const float v = out[f * R + r];
        y[(r0 + r) * ldy + at + f] = round ? driver_round_bf16(v) : v;
      }
  };
  if constexpr (R > 1 && k_block_of<Kern>() > 0) {
    // The group's tiles advance together, one K block at a time, so that the block's activations
    // stay in L1 for all of them: several rows' whole activations (4 rows of 4096 bf16 are 32 KB)
    // would not, with the weights streaming past, and every tile would reread them from L2.
    constexpr int kTiles = 8 / F;
    constexpr int64_t kBlock = k_block_of<Kern>();
    const int64_t tiles = (m_end - m) / F < kTiles ? (m_end - m) / F : kTiles;
    typename Kern::template Sums<F, R> sums[kTiles] = {};
    for (int64_t k0 = 0; k0 < in.k; k0 += kBlock) {
      const int64_t k1 = k0 + kBlock < in.k ? k0 + kBlock : in.k;
      for (int64_t t = 0; t < tiles; ++t) Kern::template tile_part<F, R>(in, w, m + t * F, r0, k0, k1, sums[t]);
    }
    for (int64_t t = 0; t < tiles; ++t) {
      Kern::template finish<F, R>(sums[t], out);
      store(m + t * F, F);
    }
    m += tiles * F;
  }
  for (; m + F <= m_end; m += F) {
    Kern::template tile<F, R>(in, w, m, r0, out);
    store(m, F);
  }
  for (; m < m_end; ++m) {
    Kern::template tile<1, R>(in, w, m, r0, out);
    store(m, 1);
  }
}

template <class Kern>
void drive(const PreparedInput& in, const WeightView& w, int64_t m0, int64_t m1, float* y, int64_t ldy, bool round) {
  constexpr int64_t kGroup = 8, kMaxRows = Kern::kMaxRows;
  static_assert(kMaxRows == 2 || kMaxRows == 4, "tiles of up to 2 or 4 rows");
  int64_t row_block = (int64_t(256) << 10) / (in.k * 4) / kMaxRows * kMaxRows;
  if (row_block < kMaxRows) row_block = kMaxRows;
  for (int64_t rb = 0; rb < in.n; rb += row_block) {
    const int64_t rb_end = rb + row_block < in.n ? rb + row_block : in.n;
    for (int64_t mg = m0; mg < m1; mg += kGroup) {
      const int64_t mg_end = mg + kGroup < m1 ? mg + kGroup : m1;
      for (int64_t r0 = rb; r0 < rb_end; r0 += kMaxRows) {
        const int64_t rows = rb_end - r0 < kMaxRows ? rb_end - r0 : kMaxRows;
        if (rows == 1) drive_group<Kern, 1>(in, w, mg, mg_end, r0, y, ldy, round);
        else if constexpr (kMaxRows == 2) drive_group<Kern, 2>(in, w, mg, mg_end, r0, y, ldy, round);
        else if (rows == 2) drive_group<Kern, 2>(in, w, mg, mg_end, r0, y, ldy, round);
        else if (rows == 3) drive_group<Kern, 3>(in, w, mg, mg_end, r0, y, ldy, round);
        else drive_group<Kern, 4>(in, w, mg, mg_end, r0, y, ldy, round);
      }
    }
  }
}

// The FP8 loop nest: as drive(), plus the activations of each block of `row_block` rows
// rescaled for each 128-row weight tile the outputs reach (1/128 of the product's work):
// rescale(tile, rb, rows) fills the kernel's buffer; group(rb, rows, m, m_end) computes outputs
// [m, m_end) (≤ 8, within one tile) of the block's `rows` rows from it.
template <class Rescale, class Group>
void drive_fp8_groups(const PreparedInput& in, int64_t m0, int64_t m1, int64_t row_block, Rescale rescale,
                      Group group) {
  for (int64_t rb = 0; rb < in.n; rb += row_block) {
    const int64_t rows = in.n - rb < row_block ? in.n - rb : row_block;
    int64_t tile = -1;
    for (int64_t mg = m0; mg < m1;) {
      int64_t mg_end = mg + 8 < m1 ? mg + 8 : m1;
      if (mg_end > (mg / 128 + 1) * 128) mg_end = (mg / 128 + 1) * 128;
      if (mg / 128 != tile) {
        tile = mg / 128;
        rescale(tile, rb, rows);
      }
      group(rb, rows, mg, mg_end);
      mg = mg_end;
    }
  }
}

// The same in tiles of ≤ 4 rows: run(rb, r0, n, m, m_end) computes rows r0 .. r0+n-1 of the block.
template <class Rescale, class Run>
void drive_fp8_nest(const PreparedInput& in, int64_t m0, int64_t m1, int64_t row_block, Rescale rescale, Run run) {
  drive_fp8_groups(in, m0, m1, row_block, rescale, [&](int64_t rb, int64_t rows, int64_t m, int64_t m_end) {
    for (int64_t r0 = 0; r0 < rows; r0 += 4) run(rb, r0, rows - r0 < 4 ? rows - r0 : 4, m, m_end);
  });
}

// drive_fp8_nest over a stack buffer of kBufferElems activation words (float for f32 kernels,
// uint16_t for bf16 ones; rows padded by 128 bytes, see ActivationBuffer), at least kMinRows
// rows deep: `scale` (the kernel's scale_for_tile) fills it per row block and weight tile, and
// tiles(tin, rb, r0, n, m, m_end) computes rows r0 .. r0+n-1 of the block from tin (the buffer).
template <class Word, int64_t kBufferElems, int64_t kMinRows, class Tiles>
void drive_fp8_buffered(const PreparedInput& in, const WeightView& w, int64_t m0, int64_t m1,
                        void (*scale)(const PreparedInput&, const WeightView&, int64_t, int64_t, int64_t, Word*, int64_t),
                        Tiles tiles) {
  alignas(64) Word stack[kBufferElems];
  const int64_t K = w.cols, ld = K + 128 / int64_t(sizeof(Word));
  // Inputs too wide for kMinRows rows on the stack (DeepSeek-V4-Flash-0731's DSpark main_proj:
  // 3 x 4096 = 12288) take a buffer of this thread's that grows to fit them.
  Word* buffer = stack;
  int64_t capacity = kBufferElems;
  if (kMinRows * ld > kBufferElems) {
    capacity = kMinRows * ld;
    buffer = static_cast<Word*>(thread_wide_buffer(size_t(capacity) * sizeof(Word)));
  }
  int64_t row_block = capacity / ld / 4 * 4;
  if (row_block < kMinRows) row_block = kMinRows;  // the buffer holds kMinRows rows
  auto rescale = [&](int64_t tile, int64_t rb, int64_t rows) { scale(in, w, tile, rb, rows, buffer, ld); };
  drive_fp8_nest(in, m0, m1, row_block, rescale, [&](int64_t rb, int64_t r0, int64_t n, int64_t m, int64_t m_end) {
    PreparedInput tin{nullptr, nullptr, nullptr, r0 + n, K, ld, 0};
    if constexpr (sizeof(Word) == 4) tin.x = buffer;
    else tin.xb = buffer;
    tiles(tin, rb, r0, n, m, m_end);
  });
}

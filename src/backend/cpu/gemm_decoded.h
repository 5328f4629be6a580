// FP8 steps of many rows (prefill, long verifications): each group of 8 weight rows is decoded once
// into a per-thread buffer and every activation row runs over it, instead of decoding the
// weights again for every tile of ≤ 4 rows. Included, like gemm_driver.h, inside an ISA's
// anonymous namespace, after it defines
//   using DecodedWord = ...;                       // the decoded weights' and activations' type
//   constexpr int kDecodedRows = ...;              // rows per decoded tile (2 or 4: registers)
//   constexpr int kStateFloats = ...;              // a tile's running sums per (output, row)
//   template <int F, int R> void decoded_tile(const DecodedWord* wd, int64_t K, const DecodedWord* x,
//       int64_t ldx, int64_t k0, int64_t k1, float* state, bool first, bool last, float* out);
//     (columns [k0, k1) of F outputs × R rows; the running sums of (f, r) at
//      state + (r·8 + f)·kStateFloats: zero when `first`, reduced into out[f·R + r] when `last`)
//   void fp8_decode_row(const WeightView&, int64_t m, DecodedWord*);
//   void scale_for_tile(...);                      // FP8: activations scaled per weight tile
//   void drive_fp8(...);                           // FP8 steps of few rows
// decoded_tile must form, for each (output, row), the operations the decoding tile forms: the
// path taken then changes no bit of any result (tests/model/kernels_test.cc checks it). The
// columns go in chunks whose weights (8 rows) stay in L1 while every activation row passes over
// them; a chain pauses between chunks by storing its sums, which changes nothing.

constexpr int64_t kDecodeFromRows = 5;    // steps of at least this many rows decode once
constexpr int64_t kRowBlockBytes = 1 << 20;  // activation rows per block: ≤ 1 MB, in L2 with the weights

inline DecodedWord* decoded_weights(int64_t K) {
  thread_local AlignedBuffer<DecodedWord> buffer;
  return buffer.get(size_t(8 * K));
}

template <int R>
void decoded_tiles_f(const DecodedWord* wd, int nf, int64_t K, const DecodedWord* x, int64_t ldx, int64_t k0,
                     int64_t k1, float* state, bool first, bool last, float* out) {
  int f = 0;
  for (; f + 4 <= nf; f += 4)
    decoded_tile<4, R>(wd + f * K, K, x, ldx, k0, k1, state + f * kStateFloats, first, last, out + f * R);
  float* st = state + f * kStateFloats;
  switch (nf - f) {
    case 3: decoded_tile<3, R>(wd + f * K, K, x, ldx, k0, k1, st, first, last, out + f * R); break;
    case 2: decoded_tile<2, R>(wd + f * K, K, x, ldx, k0, k1, st, first, last, out + f * R); break;
    case 1: decoded_tile<1, R>(wd + f * K, K, x, ldx, k0, k1, st, first, last, out + f * R); break;
    default: break;
  }
}

// Outputs [m, m + nf) (nf ≤ 8, decoded in wd) of `rows` activation rows at x into y.
inline void decoded_group(const DecodedWord* wd, int nf, const DecodedWord* x, int64_t ldx, int64_t rows, int64_t K,
                          float* y, int64_t ldy, int64_t m, bool round) {
  static_assert(kDecodedRows == 2 || kDecodedRows == 4, "decoded tiles of 2 or 4 rows");
  constexpr int64_t kChunk = 2048 / int64_t(sizeof(DecodedWord));  // 2 KB of each row: 8 weight rows in L1
  thread_local AlignedBuffer<float> states;
  float* state = states.get(size_t(rows * 8 * kStateFloats));
  float out[8 * 4];
  for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
    const int64_t k1 = K - k0 < kChunk ? K : k0 + kChunk;
    const bool first = k0 == 0, last = k1 == K;
    for (int64_t r0 = 0; r0 < rows; r0 += kDecodedRows) {
      const int R = rows - r0 < kDecodedRows ? int(rows - r0) : kDecodedRows;
      const DecodedWord* xr = x + r0 * ldx;
      float* st = state + r0 * 8 * kStateFloats;
      if (R == 1) decoded_tiles_f<1>(wd, nf, K, xr, ldx, k0, k1, st, first, last, out);
      else if constexpr (kDecodedRows == 2) decoded_tiles_f<2>(wd, nf, K, xr, ldx, k0, k1, st, first, last, out);
      else if (R == 2) decoded_tiles_f<2>(wd, nf, K, xr, ldx, k0, k1, st, first, last, out);
      else if (R == 3) decoded_tiles_f<3>(wd, nf, K, xr, ldx, k0, k1, st, first, last, out);
      else decoded_tiles_f<4>(wd, nf, K, xr, ldx, k0, k1, st, first, last, out);
      if (!last) continue;
      for (int f = 0; f < nf; ++f)
        for (int r = 0; r < R; ++r) {
          const float v = out[f * R + r];
          y[(r0 + r) * ldy + m + f] = round ? driver_round_bf16(v) : v;
        }
    }
  }
}

inline int64_t decoded_row_block(int64_t ld, int64_t n) {
  int64_t rows = kRowBlockBytes / (int64_t(sizeof(DecodedWord)) * ld);
  if (rows < 4) rows = 4;
  return rows < n ? rows : n;
}

// FP8: a block of rows' activations scaled for each 128-row weight tile (as drive_fp8), then
// each group of 8 weight rows decoded once for all of them.
inline void drive_fp8_any(const PreparedInput& in, const WeightView& w, int64_t m0, int64_t m1, float* y,
                          int64_t ldy, bool round) {
  if (in.n < kDecodeFromRows) return drive_fp8(in, w, m0, m1, y, ldy, round);
  thread_local AlignedBuffer<DecodedWord> scaled;
  const int64_t K = w.cols, ld = K + 128 / int64_t(sizeof(DecodedWord));  // padded as ActivationBuffer pads
  const int64_t row_block = decoded_row_block(ld, in.n);
  DecodedWord* xs = scaled.get(size_t(row_block * ld));
  DecodedWord* wd = decoded_weights(K);
  auto rescale = [&](int64_t tile, int64_t rb, int64_t rows) { scale_for_tile(in, w, tile, rb, rows, xs, ld); };
  drive_fp8_groups(in, m0, m1, row_block, rescale, [&](int64_t rb, int64_t rows, int64_t m, int64_t m_end) {
    const int nf = int(m_end - m);
    for (int f = 0; f < nf; ++f) fp8_decode_row(w, m + f, wd + f * K);
    decoded_group(wd, nf, xs, ld, rows, K, y + rb * ldy, ldy, m, round);
  });
}

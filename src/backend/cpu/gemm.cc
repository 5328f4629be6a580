#include "backend/cpu/gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4::cpu {

void quantize_activations_reference(const float* x, int64_t n, int64_t k, float* xq, float* sx) {
  const float inv_max = 1.0f / kFp8Max;
  const int64_t blocks = k / kFp8Block;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* src = x + r * k + b * kFp8Block;
      float* dst = xq + r * k + b * kFp8Block;
      float amax = 0.0f;
      for (int i = 0; i < kFp8Block; ++i) amax = std::max(amax, std::fabs(src[i]));
      const float s = pow2_ceil(std::max(amax, 1e-4f) * inv_max);
      const float inv_s = 1.0f / s;  // exact: s is a power of two
      for (int i = 0; i < kFp8Block; ++i)
        dst[i] = round_to_e4m3_grid(std::clamp(src[i] * inv_s, -kFp8Max, kFp8Max));
      sx[r * blocks + b] = s;
    }
  }
}

void quantize_activations(const float* x, int64_t n, int64_t k, int64_t ldx, float* xq, float* sx) {
  // The reference's steps on 8 lanes: the same IEEE operations and bit manipulations, so
  // the result is identical. NaN inputs: max(v, acc) keeps acc as std::max does, and the
  // clamp keeps NaN as std::clamp does.
  const float inv_max = 1.0f / kFp8Max;
  const int64_t blocks = k / kFp8Block;
  const __m256 sign = _mm256_set1_ps(-0.0f), lo = _mm256_set1_ps(-kFp8Max), hi = _mm256_set1_ps(kFp8Max);
  const __m256 tiny = _mm256_set1_ps(0.015625f), magic = _mm256_set1_ps(16384.0f);
  const __m256i bias = _mm256_set1_epi32(0x7FFFF), one = _mm256_set1_epi32(1);
  const __m256i keep = _mm256_set1_epi32(int32_t(0xFFF00000u));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* src = x + r * ldx + b * kFp8Block;
      float* dst = xq + r * k + b * kFp8Block;
      __m256 m = _mm256_setzero_ps();
      for (int i = 0; i < kFp8Block; i += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(src + i)), m);
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
      const float amax = _mm_cvtss_f32(m4);
      const float s = pow2_ceil(std::max(amax, 1e-4f) * inv_max);
      const __m256 inv_s = _mm256_set1_ps(1.0f / s);
      for (int i = 0; i < kFp8Block; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(src + i), inv_s);
        v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
        const __m256 a = _mm256_andnot_ps(sign, v);
        const __m256 small = _mm256_sub_ps(_mm256_add_ps(a, magic), magic);
        __m256i u = _mm256_castps_si256(a);
        u = _mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 20), one)));
        const __m256 big = _mm256_castsi256_ps(_mm256_and_si256(u, keep));
        const __m256 q = _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, tiny, _CMP_LT_OQ));
        _mm256_storeu_ps(dst + i, _mm256_or_ps(q, _mm256_and_ps(v, sign)));
      }
      sx[r * blocks + b] = s;
    }
  }
}

namespace {

// f32 layouts other than Natural (PairSplit32): the group size and the source of slot p.
int f32_group(Layout) { return 32; }
int f32_source(Layout, int p) { return p < 16 ? 2 * p : 2 * (p - 16) + 1; }

// dst row r = src row r (stride lds) permuted per group; k a multiple of the group.
void permute_rows(Layout layout, const float* src, int64_t lds, int64_t n, int64_t k, float* dst) {
  const int group = f32_group(layout);
  int perm[64];
  for (int p = 0; p < group; ++p) perm[p] = f32_source(layout, p);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < k; g += group)
      for (int p = 0; p < group; ++p) dst[r * k + g + p] = src[r * lds + g + perm[p]];
}

// The bf16 layouts' group sizes, and the source position of slot p within its group.
int bf16_group(Layout layout) { return layout == Layout::Bf16Quad128 ? 128 : 64; }
int bf16_source(Layout layout, int p) {
  if (layout == Layout::Bf16Natural) return p;
  if (layout == Layout::Bf16Quad128) return 4 * (p % 32) + p / 32;
  if (layout == Layout::Bf16PairSplit64) return p < 32 ? 2 * p : 2 * (p - 32) + 1;
  const int half = p / 32, q = p % 32;  // Bf16Unpack64
  return 16 * (q / 8) + 8 * half + q % 8;
}

bool is_bf16(Layout l) {
  return l == Layout::Bf16Natural || l == Layout::Bf16PairSplit64 || l == Layout::Bf16Unpack64 || l == Layout::Bf16Quad128;
}

}  // namespace

PreparedInput ActivationBuffer::prepare(const GemmKernel& kernel, const float* x, int64_t n, int64_t k, int64_t ldx,
                                        bool quantize) {
  PreparedInput in{x, nullptr, nullptr, n, k, ldx, 0};
  const int64_t blocks = k / kFp8Block;
  // Quantized values (f32, rows of k) first; the kernel's copy comes from them.
  const float* src = x;
  int64_t lds = ldx;
  if (quantize) {
    DSV4_CHECK(k % kFp8Block == 0, "activation quantization: ", k, " inputs are not a multiple of 128");
    float* q = q_.get(size_t(n * k));
    float* sx = s_.get(size_t(n * blocks));
    quantize_activations(x, n, k, ldx, q, sx);
    if (kernel.scale_factor != 1.0f)
      for (int64_t i = 0; i < n * blocks; ++i) sx[i] *= kernel.scale_factor;  // exact: powers of two
    src = q;
    lds = k;
    in.sx = sx;
    in.ldsx = blocks;
  } else if (kernel.wants_scales) {
    float* sx = s_.get(size_t(std::max<int64_t>(blocks, 1)));
    std::fill(sx, sx + blocks, kernel.scale_factor);
    in.sx = sx;
    in.ldsx = 0;  // every row shares the constant
  }
  if (kernel.layout == Layout::Int8Quad256) {  // W2A8 (number_formats.h), rows padded as below
    DSV4_CHECK(k % 256 == 0, "int8 activations: ", k, " inputs are not a multiple of 256");
    const int64_t ld = k + 128, groups = k / 128, lds8 = int8_quad256_scale_floats(k);
    int8_t* q = x8_.get(size_t(n * ld + k));
    int8_t* natural = q + n * ld;  // one row in input order, before the permutation
    float* s = s_.get(size_t(n * lds8));
    for (int64_t r = 0; r < n; ++r) {
      float* sr = s + r * lds8;
      quantize_int8_groups(src + r * lds, k, 128, natural, sr);
      for (int64_t g = 0; g < groups; ++g) {
        int32_t sum = 0;
        for (int64_t c = g * 128; c < g * 128 + 128; ++c) sum += natural[c];
        sr[groups + g] = 1.5f * sr[g] * float(sum);
      }
      int8_t* d = q + r * ld;
      for (int64_t b = 0; b < k; b += 256)
        for (int p = 0; p < 256; ++p) {
          const int j = p / 64, i = (p % 64) / 4, t = p % 4;
          d[b + p] = natural[b + 16 * i + 4 * t + j];
        }
    }
    in.x = nullptr;
    in.x8 = q;
    in.ldx = ld;
    in.sx = s;
    in.ldsx = lds8;
    return in;
  }
  // Rows of the copies are padded by 128 bytes: with strides of whole 4 KiB pages, the rows a tile
  // reads together (and the weight rows, whose strides are such too) fall into the same L1 sets.
  if (is_bf16(kernel.layout)) {
    const int64_t ld = k + 64;
    uint16_t* xb = xb_.get(size_t(n * ld));
    const int group = bf16_group(kernel.layout);
    int perm[128];
    for (int p = 0; p < group; ++p) perm[p] = bf16_source(kernel.layout, p);
    const bool fold = kernel.fold_scales && in.sx;
    DSV4_CHECK(!fold || k % group == 0, "folded activation scales: ", k, " inputs are not a multiple of ", group);
    for (int64_t r = 0; r < n; ++r) {
      const float* sr = src + r * lds;
      uint16_t* d = xb + r * ld;
      int64_t g = 0;
      if (fold) {  // x · s per 128 inputs: exact (s is a power of two), one bf16 operand per product
        const float* sxr = in.sx + r * in.ldsx;
        for (; g < k; g += group)
          for (int p = 0; p < group; ++p) d[g + p] = f32_to_bf16(sr[g + perm[p]] * sxr[(g + perm[p]) / kFp8Block]);
      }
      for (; g + group <= k; g += group)
        for (int p = 0; p < group; ++p) d[g + p] = f32_to_bf16(sr[g + perm[p]]);
      for (; g < k; ++g) d[g] = f32_to_bf16(sr[g]);  // (kernels need whole groups; tails stay natural)
    }
    if (fold) {
      in.sx = nullptr;
      in.ldsx = 0;
    }
    in.x = nullptr;
    in.xb = xb;
    in.ldx = ld;
    return in;
  }
  if (kernel.layout == Layout::Natural && !quantize && (n == 1 || k < 1024)) return in;  // x in place
  const int64_t ld = k + 32;
  float* xp = x_.get(size_t(n * ld));
  for (int64_t r = 0; r < n; ++r) {
    if (kernel.layout == Layout::Natural) std::memcpy(xp + r * ld, src + r * lds, size_t(k) * 4);
    else permute_rows(kernel.layout, src + r * lds, lds, 1, k, xp + r * ld);
  }
  in.x = xp;
  in.ldx = ld;
  return in;
}

namespace {

// Decodes weight row m into float values (codes for FP8/FP4, values for BF16/F32).
void decode_row(const WeightView& w, int64_t m, float* out) {
  const int64_t K = w.cols;
  switch (w.format) {
    case WeightFormat::F32: std::memcpy(out, w.data + m * K * 4, size_t(K) * 4); break;
    case WeightFormat::BF16: {
      const uint16_t* src = reinterpret_cast<const uint16_t*>(w.data) + m * K;
      for (int64_t k = 0; k < K; ++k) out[k] = bf16_to_f32(src[k]);
      break;
    }
    case WeightFormat::FP8:
    case WeightFormat::FP8F: {
      const uint8_t* src = w.data + m * K;
      for (int64_t k = 0; k < K; ++k) out[k] = e4m3_to_f32(src[k]);
      break;
    }
    case WeightFormat::INT4:
    case WeightFormat::INT4G:
      for (int64_t k = 0; k < K; ++k) out[k] = int4_packed_at(w.data + m * (K / 2), k);
      break;
    case WeightFormat::INT2:
      for (int64_t k = 0; k < K; ++k) out[k] = int2_packed_at(w.data + m * (K / 4), k);
      break;
    case WeightFormat::FP4:
    case WeightFormat::NVFP4: {
      const uint8_t* src = w.data + m * (K / 2);
      for (int64_t k = 0; k < K; k += 2) {
        out[k] = e2m1_to_f32(src[k / 2] & 15);
        out[k + 1] = e2m1_to_f32(src[k / 2] >> 4);
      }
      break;
    }
    default: throw Error(cat("linear: weight '", w.name(), "' has format ", weight_format_name(w.format)));
  }
}

// Dot product of `len` values with 8 interleaved partial sums added pairwise at the end: a
// fixed order, independent of anything but the data.
inline float dot(const float* a, const float* b, int64_t len) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int64_t whole = len - len % 8;
  int64_t k = 0;
  for (; k < whole; k += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[k + l] * b[k + l];
  for (; k < len; ++k) acc[0] += a[k] * b[k];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void reference_rows(const PreparedInput& in, const WeightView& w, int64_t m0, int64_t m1, float* y, int64_t ldy,
                    bool round) {
  std::vector<float> scratch(size_t(w.cols));
  gemm_rows_reference(in, w, m0, m1, y, ldy, round, scratch.data());
}

}  // namespace

void gemm_rows_reference(const PreparedInput& in, const WeightView& w, int64_t m_begin, int64_t m_end, float* y,
                         int64_t ldy, bool round_bf16, float* scratch) {
  const int64_t K = w.cols;
  if (w.format == WeightFormat::INT2) {  // W2A8 (number_formats.h): each row quantized once
    std::vector<int8_t> x8(size_t(in.n * K));
    std::vector<float> xs(size_t(in.n * (K / kInt2Group)));
    for (int64_t r = 0; r < in.n; ++r)
      quantize_int8_groups(in.x + r * in.ldx, K, kInt2Group, x8.data() + r * K, xs.data() + r * (K / kInt2Group));
    for (int64_t m = m_begin; m < m_end; ++m)
      for (int64_t r = 0; r < in.n; ++r) {
        const float acc = int2_w2a8_dot(w.data + m * (K / 4), reinterpret_cast<const uint16_t*>(w.scale) + m * w.scale_cols,
                                        x8.data() + r * K, xs.data() + r * (K / kInt2Group), K);
        y[r * ldy + m] = round_bf16 ? dsv4::round_bf16(acc) : acc;
      }
    return;
  }
  for (int64_t m = m_begin; m < m_end; ++m) {
    decode_row(w, m, scratch);
    for (int64_t r = 0; r < in.n; ++r) {
      const float* x = in.x + r * in.ldx;
      const float* sx = in.sx ? in.sx + r * in.ldsx : nullptr;
      float acc = 0.0f;
      if (w.format == WeightFormat::FP8 || w.format == WeightFormat::FP8F) {
        const bool f32_scales = w.format == WeightFormat::FP8F;
        const uint8_t* ws = w.scale + (m / kFp8Block) * w.scale_cols * (f32_scales ? 4 : 1);
        for (int64_t b = 0; b < w.scale_cols; ++b) {
          const int64_t k0 = b * kFp8Block, len = std::min<int64_t>(kFp8Block, K - k0);
          float scale;
          if (f32_scales) std::memcpy(&scale, ws + b * 4, 4);
          else scale = e8m0_to_f32(ws[b]);
          const float s = scale * (sx ? sx[b] : 1.0f);
          acc += dot(x + k0, scratch + k0, len) * s;
        }
      } else if (w.format == WeightFormat::FP4) {
        const uint8_t* ws = w.scale + m * w.scale_cols;
        for (int64_t b = 0; b < w.scale_cols; ++b) {
          const int64_t k0 = b * kFp4Block;
          const float s = e8m0_to_f32(ws[b]) * (sx ? sx[k0 / kFp8Block] : 1.0f);
          acc += dot(x + k0, scratch + k0, kFp4Block) * s;
        }
      } else if (w.format == WeightFormat::INT4) {  // W4A16: activations as they are
        const uint8_t* ws = w.scale + m * w.scale_cols * 2;
        for (int64_t b = 0; b < w.scale_cols; ++b) {
          const int64_t k0 = b * kInt4Group;
          uint16_t h;
          std::memcpy(&h, ws + b * 2, 2);
          acc += dot(x + k0, scratch + k0, kInt4Group) * bf16_to_f32(h);
        }
      } else if (w.format == WeightFormat::INT4G) {  // W4A16, F32 scales per w.group inputs
        const uint8_t* ws = w.scale + m * w.scale_cols * 4;
        for (int64_t b = 0; b < w.scale_cols; ++b) {
          float s;
          std::memcpy(&s, ws + b * 4, 4);
          acc += dot(x + b * w.group, scratch + b * w.group, w.group) * s;
        }
      } else if (w.format == WeightFormat::NVFP4) {
        const uint8_t* ws = w.scale + m * w.scale_cols;
        for (int64_t b = 0; b < w.scale_cols; ++b) {
          const int64_t k0 = b * kNvfp4Block;
          const float s = (e4m3_to_f32(ws[b]) * w.global_scale) * (sx ? sx[k0 / kFp8Block] : 1.0f);
          acc += dot(x + k0, scratch + k0, kNvfp4Block) * s;
        }
      } else {
        acc = dot(x, scratch, K);
      }
      y[r * ldy + m] = round_bf16 ? dsv4::round_bf16(acc) : acc;
    }
  }
}

GemmKernel select_gemm(CpuIsa isa, const WeightView& w) {
  if (isa == CpuIsa::Amx && cpu_features().has(CpuIsa::Amx)) {
    GemmKernel k = amx_gemm(w);
    if (k.rows) return k;
  }
  if ((isa == CpuIsa::Avx512Bf16 || isa == CpuIsa::Amx) && cpu_features().has(CpuIsa::Avx512Bf16)) {
    GemmKernel k = avx512bf16_gemm(w);
    if (k.rows) return k;
  }
  if (isa >= CpuIsa::Avx512 && cpu_features().has(CpuIsa::Avx512)) {
    GemmKernel k = avx512_gemm(w);
    if (k.rows) return k;
  }
  if (isa != CpuIsa::Reference && cpu_features().has(CpuIsa::Avx2)) {
    GemmKernel k = avx2_gemm(w);
    if (k.rows) return k;
  }
  GemmKernel k;
  k.rows = reference_rows;
  return k;
}

void* thread_wide_buffer(size_t bytes) {
  thread_local std::vector<uint8_t> buffer;  // (freed when the thread ends)
  if (buffer.size() < bytes + 64) buffer.resize(bytes + 64);
  const uintptr_t at = (reinterpret_cast<uintptr_t>(buffer.data()) + 63) / 64 * 64;
  return reinterpret_cast<void*>(at);
}

}  // namespace dsv4::cpu

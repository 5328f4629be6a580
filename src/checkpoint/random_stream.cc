#include "checkpoint/random_stream.h"

#include <cmath>
#include <immintrin.h>

namespace dsv4 {

namespace {

// The first `count` of v's 8 floats to dst (all 8 when count ≥ 8).
inline void store_up_to_8(float* dst, size_t count, __m256 v) {
  if (count >= 8) {
    _mm256_storeu_ps(dst, v);
    return;
  }
  alignas(32) float tail[8];
  _mm256_store_ps(tail, v);
  for (size_t j = 0; j < count; ++j) dst[j] = tail[j];
}

}  // namespace

uint64_t hash_name(std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

RandomStream::RandomStream(uint64_t seed, std::string_view name, uint64_t chunk) {
  uint64_t key = seed;
  key = splitmix64(key) ^ hash_name(name);
  key = splitmix64(key) ^ chunk;
  uint64_t state = splitmix64(key);
  for (int l = 0; l < kLanes; ++l) {
    uint64_t a = splitmix64(state), b = splitmix64(state);
    s0_[l] = uint32_t(a);
    s1_[l] = uint32_t(a >> 32);
    s2_[l] = uint32_t(b);
    s3_[l] = uint32_t(b >> 32) | 1u;  // a lane state is never all zero
  }
  scalar_ = splitmix64(state);
}

// xoshiro128** on 8 lanes at once (AVX2: every supported machine has it).
struct RandomStream::Lanes {
  __m256i s0, s1, s2, s3;

  static __m256i rotl(__m256i x, int k) {
    return _mm256_or_si256(_mm256_slli_epi32(x, k), _mm256_srli_epi32(x, 32 - k));
  }
  __m256i next() {
    const __m256i x5 = _mm256_add_epi32(_mm256_slli_epi32(s1, 2), s1);  // s1 * 5
    const __m256i r = rotl(x5, 7);
    const __m256i result = _mm256_add_epi32(_mm256_slli_epi32(r, 3), r);  // * 9
    const __m256i t = _mm256_slli_epi32(s1, 9);
    s2 = _mm256_xor_si256(s2, s0);
    s3 = _mm256_xor_si256(s3, s1);
    s1 = _mm256_xor_si256(s1, s2);
    s0 = _mm256_xor_si256(s0, s3);
    s2 = _mm256_xor_si256(s2, t);
    s3 = rotl(s3, 11);
    return result;
  }
};

RandomStream::Lanes RandomStream::load() const {
  return {_mm256_load_si256(reinterpret_cast<const __m256i*>(s0_)),
          _mm256_load_si256(reinterpret_cast<const __m256i*>(s1_)),
          _mm256_load_si256(reinterpret_cast<const __m256i*>(s2_)),
          _mm256_load_si256(reinterpret_cast<const __m256i*>(s3_))};
}

void RandomStream::store(const Lanes& l) {
  _mm256_store_si256(reinterpret_cast<__m256i*>(s0_), l.s0);
  _mm256_store_si256(reinterpret_cast<__m256i*>(s1_), l.s1);
  _mm256_store_si256(reinterpret_cast<__m256i*>(s2_), l.s2);
  _mm256_store_si256(reinterpret_cast<__m256i*>(s3_), l.s3);
}

void RandomStream::normal(float* out, size_t n, float mean, float std) {
  // Sum of four 16-bit uniforms: mean 131070, standard deviation 65536 / sqrt(3).
  const __m256 k = _mm256_set1_ps(std * float(std::sqrt(3.0) / 65536.0));
  const __m256 m = _mm256_set1_ps(mean);
  const __m256i low16 = _mm256_set1_epi32(0xFFFF), center = _mm256_set1_epi32(131070);
  Lanes l = load();
  for (size_t i = 0; i < n; i += kLanes) {
    const __m256i a = l.next(), b = l.next();
    __m256i sum = _mm256_add_epi32(_mm256_and_si256(a, low16), _mm256_srli_epi32(a, 16));
    sum = _mm256_add_epi32(sum, _mm256_add_epi32(_mm256_and_si256(b, low16), _mm256_srli_epi32(b, 16)));
    const __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(sum, center)), k, m);
    store_up_to_8(out + i, n - i, v);
  }
  store(l);
}

void RandomStream::uniform(float* out, size_t n, float lo, float hi) {
  const __m256 k = _mm256_set1_ps((hi - lo) * float(1.0 / 16777216.0));  // 24 bits: exact in float
  const __m256 base = _mm256_set1_ps(lo);
  Lanes l = load();
  for (size_t i = 0; i < n; i += kLanes) {
    const __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(l.next(), 8)), k, base);
    store_up_to_8(out + i, n - i, v);
  }
  store(l);
}

}  // namespace dsv4

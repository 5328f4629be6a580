// Deterministic random numbers for generated checkpoints.
//
// Each stream is keyed by (seed, tensor name, chunk index), so a tensor's bytes do not
// depend on which thread generated which chunk, nor on the thread count. The bulk
// generator runs 8 interleaved xoshiro128** lanes (plain 32-bit integer operations that
// the compiler vectorizes with AVX2); normal variates are approximated by the sum of
// four 16-bit uniforms (Irwin-Hall, n = 4): mean 0, variance 1, bounded by +-3.46,
// which is all the weights of a synthetic checkpoint need.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dsv4 {

// splitmix64: a good 64-bit mixer, used for keys and scalar draws.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// FNV-1a of a name, to key streams by tensor name.
uint64_t hash_name(std::string_view name);

class RandomStream {
 public:
  static constexpr int kLanes = 8;

  RandomStream(uint64_t seed, std::string_view name, uint64_t chunk);

  // n approximately N(mean, std^2) values.
  void normal(float* out, size_t n, float mean, float std);
  // n values uniform in [lo, hi).
  void uniform(float* out, size_t n, float lo, float hi);
  // Scalar draws (permutations, expert ids): a separate splitmix64 sequence of the same key.
  uint64_t next_u64() { return splitmix64(scalar_); }
  // Uniform integer in [0, n), n > 0 (multiply-shift; the bias is below 2^-32 for our n).
  uint64_t below(uint64_t n) { return uint64_t((unsigned __int128)next_u64() * n >> 64); }

 private:
  struct Lanes;  // the 8 lanes in AVX2 registers
  Lanes load() const;
  void store(const Lanes& lanes);

  alignas(32) uint32_t s0_[kLanes], s1_[kLanes], s2_[kLanes], s3_[kLanes];
  uint64_t scalar_ = 0;
};

}  // namespace dsv4

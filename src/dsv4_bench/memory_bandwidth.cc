#include "dsv4_bench/memory_bandwidth.h"

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/error.h"

namespace dsv4::bench {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

// Sums 128 bytes per iteration with four independent accumulators (loads, not compute, bound),
// prefetching 2 KB ahead into L2 as the kernels do (within a page the hardware prefetchers alone
// do as well; across 4 KiB page boundaries they stop), so the reference is what reads can reach.
float sum_bytes(const uint8_t* p, size_t bytes) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < bytes; i += 128) {
    _mm_prefetch(reinterpret_cast<const char*>(p + i + 2048), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(p + i + 2048 + 64), _MM_HINT_T1);
    a0 = _mm256_add_ps(a0, _mm256_load_ps(reinterpret_cast<const float*>(p + i)));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(reinterpret_cast<const float*>(p + i + 32)));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(reinterpret_cast<const float*>(p + i + 64)));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(reinterpret_cast<const float*>(p + i + 96)));
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

}  // namespace

BandwidthProbe::BandwidthProbe(ThreadPool& pool, size_t bytes) : pool_(pool) {
  const size_t threads = size_t(pool.size());
  slice_ = std::max<size_t>(4096, bytes / threads / 4096 * 4096);
  bytes_ = slice_ * threads;
  // Plain anonymous pages, like the buffers of the STREAM benchmark (no huge-page request).
  void* mem = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  DSV4_CHECK(mem != MAP_FAILED, "bandwidth: cannot map ", bytes_, " bytes");
  buf_ = static_cast<uint8_t*>(mem);
  sink_.resize(threads);
  // Each thread touches its own slice first (pages land near the thread that reads them).
  pool_.run(int64_t(threads), [&](int64_t t, int) { std::memset(buf_ + size_t(t) * slice_, 1, slice_); });
}

BandwidthProbe::~BandwidthProbe() { munmap(buf_, bytes_); }

double BandwidthProbe::sample() {
  const auto t0 = std::chrono::steady_clock::now();
  pool_.run(int64_t(sink_.size()), [&](int64_t t, int) { sink_[size_t(t)] = sum_bytes(buf_ + size_t(t) * slice_, slice_); });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return double(bytes_) / s / 1e9;
}

BandwidthResult measure_read_bandwidth(ThreadPool& pool, size_t bytes, int repetitions) {
  BandwidthProbe probe(pool, bytes);
  BandwidthResult result;
  result.bytes = probe.bytes();
  probe.sample();  // warm-up
  for (int rep = 0; rep < repetitions; ++rep) result.all_gbs.push_back(probe.sample());
  result.gbs = median(result.all_gbs);
  return result;
}

}  // namespace dsv4::bench

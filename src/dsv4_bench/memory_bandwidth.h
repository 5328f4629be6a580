// The machine's memory read bandwidth: a STREAM-like sum over a buffer much larger than the
// caches, split over the threads of a pool. The reference figure the kernels are held to.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"

namespace dsv4::bench {

struct BandwidthResult {
  double gbs = 0;                 // median over the repetitions (1e9 bytes per second)
  std::vector<double> all_gbs;
  size_t bytes = 0;
};

// A buffer of `bytes` (rounded to 4 KiB per thread), touched once, read whole by sample() with all
// of the pool's threads: one sample is one pass, in GB/s (1e9 bytes per second).
class BandwidthProbe {
 public:
  BandwidthProbe(ThreadPool& pool, size_t bytes);
  ~BandwidthProbe();
  BandwidthProbe(const BandwidthProbe&) = delete;
  BandwidthProbe& operator=(const BandwidthProbe&) = delete;
  double sample();
  size_t bytes() const { return bytes_; }

 private:
  ThreadPool& pool_;
  size_t bytes_ = 0, slice_ = 0;
  uint8_t* buf_ = nullptr;
  std::vector<float> sink_;
};

// Reads `bytes` `repetitions` times (after one warm-up pass) with all of the pool's threads.
BandwidthResult measure_read_bandwidth(ThreadPool& pool, size_t bytes = size_t(1) << 30, int repetitions = 7);

double median(std::vector<double> v);

}  // namespace dsv4::bench

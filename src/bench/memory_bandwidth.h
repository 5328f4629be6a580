// The machine's memory read bandwidth: a STREAM-like sum over a buffer much larger than the
// caches, split over the threads of a pool. The reference figure the kernels are held to.
#pragma once
#include <cstddef>
#include <vector>

#include "core/thread_pool.h"

namespace dsv4::bench {

struct BandwidthResult {
  double gbs = 0;                 // median over the repetitions (1e9 bytes per second)
  std::vector<double> all_gbs;
  size_t bytes = 0;
};

// Reads `bytes` (rounded to 4 KiB per thread) `repetitions` times with all of the pool's threads.
BandwidthResult measure_read_bandwidth(ThreadPool& pool, size_t bytes = size_t(1) << 30, int repetitions = 7);

double median(std::vector<double> v);

}  // namespace dsv4::bench

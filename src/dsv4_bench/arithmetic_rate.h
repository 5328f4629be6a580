// Whether a step is bound by bytes or by arithmetic, measured: how fast each weight format's
// product kernel turns weight bytes into products when those bytes come from the core's own
// cache (one decode row; every thread on its own cache-resident slice of a real weight of
// that format), so that memory cannot be what limits it. A step whose weights of each format,
// divided by these rates, take longer than its bytes take at the measured bandwidth is bound
// by arithmetic: a faster memory would not make it faster, a faster kernel would.
#pragma once
#include <map>

#include "backend/cpu/cpu_backend.h"
#include "dsv4_bench/weight_bytes.h"

namespace dsv4::bench {

struct ArithmeticRates {
  std::map<WeightFormat, double> gbs;  // weight bytes per second (1e9) through the kernel, all threads together
};

// One representative weight per format present in `w` (dense FP8, routed FP4/FP8 experts, the
// BF16 head, an F32 hyper-connection matrix), timed on `be`'s kernels and threads.
ArithmeticRates measure_arithmetic_rates(CpuBackend& be, const ModelWeights& w);

// The time (ms) the kernels need for these weights at these rates (formats without a rate: 0).
double arithmetic_ms(const ArithmeticRates& rates, const FormatBytes& bytes);

}  // namespace dsv4::bench

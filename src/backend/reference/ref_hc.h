// The scalar statement of the hyper-connection maths that the CPU backend shares with the
// reference (the Sinkhorn step is hc×hc per row: no SIMD form is worth a second copy).
#pragma once
#include <cstdint>

namespace dsv4 {

// The Sinkhorn normalisation of C [hc, hc] in place: softmax over each row, + eps, columns ÷
// (column sum + eps); then iters − 1 times rows ÷ (row sum + eps) and columns ÷ (column sum + eps).
void ref_sinkhorn(float* c, int64_t hc, int64_t iters, float eps);

}  // namespace dsv4

// Weight quantization exactly as the released checkpoints store weights: FP8 e4m3 codes
// with one power-of-two E8M0 scale per 128x128 tile, and FP4 e2m1 codes with one scale per
// 32 inputs of a row (and INT4 with BF16 scales, below). The scale of a block is 2^ceil(log2(amax / max_code)), so that every
// code lies within the format's range and the largest one of the block is above half of it;
// an all-zero block gets the scale 2^0. Codes are x / scale rounded to nearest, ties to even.
//
// These are the bulk encoders of make-checkpoint (branch-free, vectorizable); the tests
// check them against the reference conversions of core/number_formats.h.
#pragma once
#include <cstdint>

namespace dsv4 {

// E8M0 byte of the block scale for a block whose largest magnitude is `amax`.
uint8_t block_scale_e8m0(float amax, float max_code);

// FP8 for one stripe of up to 128 rows: x [rows, cols] -> codes [rows, cols] and
// scales [ceil(cols / 128)] (the stripe's row of the scale tensor).
void quantize_fp8_stripe(const float* x, int64_t rows, int64_t cols, uint8_t* codes, uint8_t* scales);
// Like quantize_fp8_stripe with every tile's scale fixed to 2^scale_exp (values beyond
// the range saturate): an identity matrix stored as 1.0 x 2^0, as a hand-built weight would be.
void quantize_fp8_stripe_fixed(const float* x, int64_t rows, int64_t cols, int scale_exp,
                               uint8_t* codes, uint8_t* scales);

// FP4 for whole rows (cols % 32 == 0): x [rows, cols] -> packed [rows, cols / 2]
// (low nibble = even column) and scales [rows, cols / 32].
void quantize_fp4_rows(const float* x, int64_t rows, int64_t cols, uint8_t* packed, uint8_t* scales);

// INT4 (W4A16) for whole rows (cols % 128 == 0), per group of 128 inputs of a row: scale =
// bf16(amax / 7) (1 for an all-zero group), q = clamp(round(v / scale), -8, 7) + 8. x [rows, cols]
// -> packed [rows, cols / 2] (low nibble = even column) and BF16 scales [rows, cols / 128]
// (little-endian): the compressed-tensors W4A16 layout, and the int4 draft head's.
void quantize_int4_rows(const float* x, int64_t rows, int64_t cols, uint8_t* packed, uint8_t* scales);

// INT2 for whole rows (cols % 128 == 0), per group of 128 inputs of a row: the scale s of the
// levels (q - 1.5)·s, q in 0..3, fitted to the group's values by least squares (two rounds of
// assigning each value its nearest level and solving for s, from s = the group's RMS), then
// rounded to BF16 (1 for an all-zero group); q = the nearest level's. x [rows, cols] -> packed
// [rows, cols / 4] (column 4j+i in bits 2i..2i+1 of byte j) and BF16 scales [rows, cols / 128].
void quantize_int2_rows(const float* x, int64_t rows, int64_t cols, uint8_t* packed, uint8_t* scales);

// bf16 of n values (2n bytes, little-endian), round to nearest even, as f32_to_bf16.
void encode_bf16(const float* x, int64_t n, uint8_t* out);

// Single-value encoders of the bulk paths (|v| <= 448 resp. any finite v), for tests.
uint8_t encode_e4m3_in_range(float v);
uint8_t encode_e2m1_rne(float v);

}  // namespace dsv4

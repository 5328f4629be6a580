// Weights as the ops see them: typed, non-owning views of [rows, cols] matrices in the
// formats DeepSeek-V4 checkpoints use. Where the bytes live (the mapped checkpoint, a
// backend's own buffers) and which tensor they came from is the caller's business; a view
// carries a label only for messages.
//
// Each format is described once, in weight_format_traits(): the bits per value and the
// block one scale covers. Byte counts and scale shapes everywhere derive from it, so
// a new encoding is added in one table.
#pragma once
#include <cstdint>
#include <string_view>

namespace dsv4 {

enum class WeightFormat : uint8_t {
  F32,
  BF16,
  FP8,  // e4m3 codes [rows, cols] + E8M0 scale per 128x128 tile
  FP4,  // e2m1 codes packed two per byte [rows, cols/2] + E8M0 scale per 32 inputs of a row
  I64,
  I32,
  NVFP4,  // e2m1 codes packed two per byte [rows, cols/2] (low nibble first) + E4M3 scale per 16
          // inputs of a row, times the view's global_scale (ModelOpt weight_scale_2; the inverse
          // of compressed-tensors' weight_global_scale)
  FP8F,   // e4m3 codes [rows, cols] + an F32 multiplier per 128x128 tile (compressed-tensors'
          // weight_scale, transformers' weight_scale_inv)
  INT4,   // compressed-tensors W4A16: 4-bit q packed 8 per int32 lowest bits first [rows, cols/8],
          // value (q - 8) x a BF16 scale per 128 inputs of a row; activations not quantized
  INT4G,  // compressed-tensors W4A16 with another group size or F16/F32 scales: INT4's codes, value
          // (q - 8) x an F32 scale per `group` inputs of a row (16-bit scales widened at load). Run
          // by the generic kernels only (the vector kernels take INT4's BF16 scales per 128)
  INT2,   // 2-bit q packed 4 per byte lowest bits first [rows, cols/4], value (q - 1.5) x a BF16
          // scale per 128 inputs of a row; activations quantized to int8 per 128 inputs (W2A8,
          // number_formats.h). The draft head's copy only: no checkpoint holds it
};

struct WeightFormatTraits {
  const char* name;
  int bits;                 // per value of the code tensor
  int64_t scale_block_rows;  // one scale (E8M0; E4M3 NVFP4; F32 FP8F; BF16 INT4/INT2) per [scale_block_rows,
  int64_t scale_block_cols;  // scale_block_cols] block; 0 = the format has no scales
  int scale_bytes = 1;       // per scale (FP8F: 4, an F32; INT4, INT2: 2, a BF16)
  bool has_scales() const { return scale_block_rows > 0; }
};
const WeightFormatTraits& weight_format_traits(WeightFormat f);
inline const char* weight_format_name(WeightFormat f) { return weight_format_traits(f).name; }

// Bytes of the codes, and the shape of the scale tensor ([0, 0] without scales), of a
// [rows, cols] weight in format f.
int64_t weight_code_bytes(WeightFormat f, int64_t rows, int64_t cols);
int64_t weight_scale_rows(WeightFormat f, int64_t rows);
int64_t weight_scale_cols(WeightFormat f, int64_t cols);

struct WeightView {
  WeightFormat format = WeightFormat::F32;
  int64_t rows = 0, cols = 0;           // logical [out, in]; vectors have rows == 1
  const uint8_t* data = nullptr;
  const uint8_t* scale = nullptr;       // formats with scales only
  int64_t scale_cols = 0;               // row stride of the scale tensor
  std::string_view label;               // the tensor's name, for messages
  float global_scale = 1.0f;            // NVFP4: multiplies every block scale
  int64_t group = 0;                    // INT4G: inputs per scale

  bool present() const { return data != nullptr; }
  int64_t numel() const { return rows * cols; }
  size_t bytes() const;                 // code + scale bytes (0 when unbound)
  std::string_view name() const { return label.empty() ? std::string_view("<unbound>") : label; }
};

// The weight groups single ops take.
struct HcWeights { WeightView fn, base, scale; };          // [(2+hc)hc, hc·D], [(2+hc)hc], [3]
struct HcHeadWeights { WeightView fn, base, scale; };      // [hc, hc·D], [hc], [1]
struct ExpertWeights { WeightView w1, w2, w3; };           // gate, down, up

}  // namespace dsv4

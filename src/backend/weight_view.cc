#include "backend/weight_view.h"

#include "core/number_formats.h"

namespace dsv4 {

const WeightFormatTraits& weight_format_traits(WeightFormat f) {
  static constexpr WeightFormatTraits kF32{"F32", 32, 0, 0}, kBf16{"BF16", 16, 0, 0},
      kFp8{"FP8", 8, kFp8Block, kFp8Block}, kFp4{"FP4", 4, 1, kFp4Block}, kI64{"I64", 64, 0, 0}, kI32{"I32", 32, 0, 0},
      kNvfp4{"NVFP4", 4, 1, kNvfp4Block}, kFp8f{"FP8F", 8, kFp8Block, kFp8Block, 4},
      kInt4{"INT4", 4, 1, kInt4Group, 2}, kInt4g{"INT4G", 4, 0, 0}, kInt2{"INT2", 2, 1, kInt2Group, 2};
  switch (f) {
    case WeightFormat::F32: return kF32;
    case WeightFormat::BF16: return kBf16;
    case WeightFormat::FP8: return kFp8;
    case WeightFormat::FP4: return kFp4;
    case WeightFormat::I64: return kI64;
    case WeightFormat::I32: return kI32;
    case WeightFormat::NVFP4: return kNvfp4;
    case WeightFormat::FP8F: return kFp8f;
    case WeightFormat::INT4: return kInt4;
    case WeightFormat::INT4G: return kInt4g;  // (its scale block is the view's group)
    case WeightFormat::INT2: return kInt2;
  }
  return kF32;
}

int64_t weight_code_bytes(WeightFormat f, int64_t rows, int64_t cols) {
  return rows * cols * weight_format_traits(f).bits / 8;
}

int64_t weight_scale_rows(WeightFormat f, int64_t rows) {
  const auto& t = weight_format_traits(f);
  return t.has_scales() ? (rows + t.scale_block_rows - 1) / t.scale_block_rows : 0;
}

int64_t weight_scale_cols(WeightFormat f, int64_t cols) {
  const auto& t = weight_format_traits(f);
  return t.has_scales() ? (cols + t.scale_block_cols - 1) / t.scale_block_cols : 0;
}

size_t WeightView::bytes() const {
  if (!present()) return 0;
  const int64_t scales = !scale                        ? 0
                         : format == WeightFormat::INT4G ? rows * scale_cols * 4
                                                        : weight_scale_rows(format, rows) * weight_scale_cols(format, cols) *
                                                              weight_format_traits(format).scale_bytes;
  return size_t(weight_code_bytes(format, rows, cols) + scales);
}

}  // namespace dsv4

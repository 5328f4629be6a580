#include "engine/draft_head.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "checkpoint/weight_quantizer.h"
#include "core/error.h"
#include "core/number_formats.h"
#include "core/thread_pool.h"

namespace dsv4 {
namespace {

constexpr int64_t kTile = kFp8Block;  // FP8: rows and columns of one scale tile

}  // namespace

void head_rows_to_f32(const WeightView& head, int64_t r0, int64_t r1, float* out) {
  const int64_t n = (r1 - r0) * head.cols;
  if (head.format == WeightFormat::F32) {
    std::memcpy(out, head.data + r0 * head.cols * 4, size_t(n) * 4);
    return;
  }
  const uint8_t* src = head.data + r0 * head.cols * 2;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    out[i] = bf16_to_f32(h);
  }
}

const char* draft_head_format_name(DraftHeadFormat f) {
  switch (f) {
    case DraftHeadFormat::Target: return "target";
    case DraftHeadFormat::Fp8: return "fp8";
    case DraftHeadFormat::Int4: return "int4";
    case DraftHeadFormat::Int2: return "int2";
    case DraftHeadFormat::Auto: return "auto";
  }
  return "?";
}

DraftHeadFormat parse_draft_head_format(const std::string& name) {
  for (DraftHeadFormat f : {DraftHeadFormat::Target, DraftHeadFormat::Fp8, DraftHeadFormat::Int4,
                            DraftHeadFormat::Int2, DraftHeadFormat::Auto})
    if (name == draft_head_format_name(f)) return f;
  throw Error(cat("unknown draft head format '", name, "' (choose target|fp8|int4|int2|auto)"));
}

DraftHeadFormat resolve_draft_head_format(DraftHeadFormat f, const WeightView& head, bool int2_kernel) {
  if (f != DraftHeadFormat::Auto) return f;
  const bool copyable = head.present() && (head.format == WeightFormat::BF16 || head.format == WeightFormat::F32) &&
                        head.cols % kInt4Group == 0;
  if (!copyable) return DraftHeadFormat::Target;
  return int2_kernel && head.cols % (2 * kInt2Group) == 0 ? DraftHeadFormat::Int2 : DraftHeadFormat::Int4;
}

WeightView int2_copy_geometry(const WeightView& head) {
  WeightView v;
  v.format = WeightFormat::INT2;
  v.rows = head.rows;
  v.cols = head.cols;
  v.scale_cols = weight_scale_cols(WeightFormat::INT2, head.cols);
  v.label = "draft head (int2 copy of the head)";
  return v;
}

DraftHead::DraftHead(const WeightView& head, DraftHeadFormat format, int64_t rows, int threads) : format_(format) {
  DSV4_CHECK(format == DraftHeadFormat::Fp8 || format == DraftHeadFormat::Int4 || format == DraftHeadFormat::Int2,
             "draft head: a copy needs a format (fp8, int4 or int2), not ", draft_head_format_name(format));
  DSV4_CHECK(head.present() && (head.format == WeightFormat::BF16 || head.format == WeightFormat::F32),
             "draft head: a ", draft_head_format_name(format), " copy is made from a BF16 or F32 head; '",
             head.name(), "' is ", head.present() ? weight_format_name(head.format) : "unbound");
  if (rows == 0) rows = head.rows;
  DSV4_CHECK(rows > 0 && rows <= head.rows, "draft head: ", rows, " rows of '", head.name(), "' (", head.rows, ")");
  const int64_t cols = head.cols;
  view_.rows = rows;
  view_.cols = cols;
  view_.label = format == DraftHeadFormat::Fp8    ? "draft head (fp8 copy of the head)"
                : format == DraftHeadFormat::Int4 ? "draft head (int4 copy of the head)"
                                                  : "draft head (int2 copy of the head)";
  ThreadPool pool(threads);

  if (format == DraftHeadFormat::Fp8) {
    view_.format = WeightFormat::FP8;
    const int64_t stripes = (rows + kTile - 1) / kTile, tiles = (cols + kTile - 1) / kTile;
    codes_.resize(size_t(rows * cols));
    scales_.resize(size_t(stripes * tiles));
    std::vector<std::vector<float>> buffers(size_t(pool.size()));
    pool.run(stripes, [&](int64_t s, int worker) {
      const int64_t r0 = s * kTile, r1 = std::min(rows, r0 + kTile);
      std::vector<float>& x = buffers[size_t(worker)];
      x.resize(size_t(kTile * cols));
      head_rows_to_f32(head, r0, r1, x.data());
      quantize_fp8_stripe(x.data(), r1 - r0, cols, codes_.data() + r0 * cols, scales_.data() + s * tiles);
    });
    view_.scale_cols = tiles;
  } else {
    const bool int2 = format == DraftHeadFormat::Int2;
    static_assert(kInt4Group == kInt2Group, "one group size");
    DSV4_CHECK(cols % kInt4Group == 0, "draft head: ", draft_head_format_name(format), " needs columns in groups of ",
               kInt4Group, "; '", head.name(), "' has ", cols);
    view_.format = int2 ? WeightFormat::INT2 : WeightFormat::INT4;
    const int64_t groups = cols / kInt4Group, per_byte = int2 ? 4 : 2;
    codes_.resize(size_t(rows * cols / per_byte));
    scales_.resize(size_t(rows * groups * 2));
    std::vector<std::vector<float>> buffers(size_t(pool.size()));
    constexpr int64_t kRowsPerTask = 64;
    pool.run((rows + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t t, int worker) {
      const int64_t r0 = t * kRowsPerTask, r1 = std::min(rows, r0 + kRowsPerTask);
      std::vector<float>& x = buffers[size_t(worker)];
      x.resize(size_t(kRowsPerTask * cols));
      head_rows_to_f32(head, r0, r1, x.data());
      uint8_t* codes = codes_.data() + r0 * cols / per_byte;
      if (int2) quantize_int2_rows(x.data(), r1 - r0, cols, codes, scales_.data() + r0 * groups * 2);
      else quantize_int4_rows(x.data(), r1 - r0, cols, codes, scales_.data() + r0 * groups * 2);
    });
    view_.scale_cols = groups;
  }
  view_.data = codes_.data();
  view_.scale = scales_.data();
  DSV4_CHECK(view_.bytes() == codes_.size() + scales_.size(), "draft head: ", view_.bytes(), " bytes described, ",
             codes_.size() + scales_.size(), " held");
}

void DraftHead::release_if_moved() {
  if (view_.data == codes_.data()) return;
  std::vector<uint8_t>().swap(codes_);
  std::vector<uint8_t>().swap(scales_);
}

}  // namespace dsv4

// The compressed-tensors W4A16-FP8 layout: INT4 experts against their dequantized values, the
// compressors' and the indexer's FP8 blocks against their BF16 values, and INT4 with other groups
// and scale types on the generic kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "cli/encodings_support.h"
#include "core/number_formats.h"

namespace dsv4 {
namespace {

using namespace encodings;

// W4A16-FP8's FP8 blocks of the compressors and the indexer, rewritten as the BF16 values they
// hold (e4m3 x a power of two: exact in BF16), their F32 scales dropped. Returns how many.
int compressors_to_bf16(std::vector<StoredTensor>& ts) {
  int n = 0;
  std::vector<std::string> scales;
  for (StoredTensor& t : ts) {
    const bool projection = t.name.find(".compressor.") != std::string::npos || t.name.ends_with(".weights_proj.weight");
    if (!projection || t.dtype != DType::F8_E4M3) continue;
    const std::string scale_name = t.name.substr(0, t.name.size() - 7) + ".weight_scale";
    const StoredTensor& scale = find(ts, scale_name);
    const int64_t rows = t.shape[0], cols = t.shape[1], tc = scale.shape[1];
    std::vector<uint8_t> bytes(size_t(rows * cols) * 2);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        float s;
        std::memcpy(&s, scale.bytes.data() + 4 * ((r / kFp8Block) * tc + c / kFp8Block), 4);
        const float v = e4m3_to_f32(t.bytes[size_t(r * cols + c)]) * s;
        const uint16_t h = f32_to_bf16(v);
        EXPECT_EQ(bf16_to_f32(h), v);
        std::memcpy(bytes.data() + 2 * (r * cols + c), &h, 2);
      }
    t.dtype = DType::BF16;
    t.bytes = std::move(bytes);
    scales.push_back(scale_name);
    ++n;
  }
  std::erase_if(ts, [&](const StoredTensor& t) { return std::find(scales.begin(), scales.end(), t.name) != scales.end(); });
  return n;
}

// The INT4 experts against the same dequantized values stored plainly: (q − 8) × scale has up to
// 11 significant bits, more than BF16 holds, so the plain copy is F32 — the same unquantized-
// activation path as BF16 (W4A16: neither quantizes its activations). Only the summation order
// differs: the bound of Fp8ExpertsAgreeWithTheRelease, and the same greedy tokens. (The compressors'
// FP8 blocks are BF16 on both sides here: their quantized activations would magnify the summation
// order's last bits; W4A16Fp8CompressorsMatchTheirBf16Values holds them.)
TEST(Encodings, Int4MatchesItsDequantizedValues) {
  const fs::path int4 = edited_copy(make_encoded("enc_int4_plain", "ct-int4"), "enc_int4_plain_int4",
                                    [&](std::vector<StoredTensor>& ts) { EXPECT_GT(compressors_to_bf16(ts), 0); });
  int rewritten = 0;
  const fs::path plain = edited_copy(int4, "enc_int4_plain_f32", [&](std::vector<StoredTensor>& ts) {
    std::vector<StoredTensor> out;
    for (const StoredTensor& t : ts) {
      if (!t.name.ends_with(".weight_packed")) continue;
      const std::string p = t.name.substr(0, t.name.size() - std::string(".weight_packed").size());
      const StoredTensor& scale = find(ts, p + ".weight_scale");
      const int64_t rows = t.shape[0], cols = t.shape[1] * 8, groups = cols / kInt4Group;
      std::vector<uint8_t> bytes(size_t(rows * cols) * 4);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          uint16_t h;
          std::memcpy(&h, scale.bytes.data() + 2 * (r * groups + c / kInt4Group), 2);
          const float v = int4_packed_at(t.bytes.data() + r * (cols / 2), c) * bf16_to_f32(h);
          std::memcpy(bytes.data() + 4 * (r * cols + c), &v, 4);
        }
      out.push_back({p + ".weight", DType::F32, {rows, cols}, std::move(bytes)});
      ++rewritten;
    }
    std::erase_if(ts, [](const StoredTensor& t) {
      return t.name.ends_with(".weight_packed") || t.name.ends_with(".weight_shape") ||
             (t.name.ends_with(".weight_scale") && t.dtype == DType::BF16 && t.name.find("experts.") != std::string::npos);
    });
    for (StoredTensor& t : out) ts.push_back(std::move(t));
  });
  ASSERT_GT(rewritten, 10);
  EXPECT_EQ(module(inspect(plain), "routed experts")["encoding"], "F32 100%");
  EXPECT_EQ(generate(int4, 0)["tokens"], generate(plain, 0)["tokens"]);
  const auto a = logits(int4), b = logits(plain);  // (last: `score` writes its file into the model's folder)
  EXPECT_LT(max_row_rel_l2(a.first, b.first), 2e-3);
  EXPECT_LT(max_row_rel_l2(a.second, b.second), 2e-3);
  // (On the tiny model the sums come out bit-identical; inspect above shows the F32 path was taken.)
}

// The published W4A16-FP8 layout holds the compressors' and the indexer's projections as FP8
// blocks (F32 scales): against the same values in BF16 the only difference is that FP8 linears
// quantize their activations (e4m3 per 128 inputs), as the FP8 attention linears of the release
// do against a BF16 conversion: the bound of Bf16IsCloseToTheRelease. Speculation keeps the
// greedy output (SpeculativeGreedyEqualsPlainGreedy runs ct-int4 too).
TEST(Encodings, W4A16Fp8CompressorsMatchTheirBf16Values) {
  const fs::path fp8 = make_encoded("enc_w4a16_fp8", "ct-int4");
  int rewritten = 0;
  const fs::path bf16 = edited_copy(fp8, "enc_w4a16_fp8_bf16", [&](std::vector<StoredTensor>& ts) { rewritten = compressors_to_bf16(ts); });
  // tiny's compressed layers: wkv and wgate of every compressor, the indexer's weights_proj.
  EXPECT_GE(rewritten, 5);
  // inspect's group of them: FP8 blocks with F32 scales (FP8F) in the published layout, BF16 here.
  const json fp8_group = module(inspect(fp8), "compressors and indexers")["format_bytes"];
  const json bf16_group = module(inspect(bf16), "compressors and indexers")["format_bytes"];
  EXPECT_GT(fp8_group.value("FP8F", 0), 0);
  EXPECT_LT(bf16_group.value("FP8F", 0), fp8_group.value("FP8F", 0));  // (the indexer's wq_b stays FP8F)
  EXPECT_GT(bf16_group.value("BF16", 0), fp8_group.value("BF16", 0));
  const auto a = logits(fp8), b = logits(bf16);
  const double target = max_row_rel_l2(a.first, b.first);
  EXPECT_LT(target, 0.1);
  EXPECT_GT(target, 0.0);  // the FP8 path was taken: its activations were quantized
  EXPECT_LT(max_row_rel_l2(a.second, b.second), 0.1);
}

// INT4 with other scale types or groups (compressed-tensors writes the group in config.json):
// the same values with F32 or F16 scales, or in groups of 64 (each group-128 scale written twice),
// run on the generic kernels (INT4G) and agree with the vector kernels' INT4 within summation order,
// with the same greedy tokens. A group the config contradicts is refused naming both.
TEST(Encodings, Int4OtherGroupsAndScaleTypesRunOnTheGenericKernels) {
  const fs::path base = edited_copy(make_encoded("enc_int4g", "ct-int4"), "enc_int4g_base",
                                    [&](std::vector<StoredTensor>& ts) { compressors_to_bf16(ts); });
  const auto rescaled = [&](const std::string& name, DType dtype, int64_t group) {
    return edited_copy(base, name, [&](std::vector<StoredTensor>& ts) {
      for (StoredTensor& t : ts) {
        if (!t.name.ends_with(".weight_scale") || t.dtype != DType::BF16 || t.name.find("experts.") == std::string::npos)
          continue;
        const int64_t rows = t.shape[0], groups = t.shape[1], per = kInt4Group / group, size = dtype == DType::F32 ? 4 : 2;
        std::vector<uint8_t> bytes(size_t(rows * groups * per * size));
        for (int64_t i = 0; i < rows * groups; ++i) {
          uint16_t h;
          std::memcpy(&h, t.bytes.data() + 2 * i, 2);
          const float v = bf16_to_f32(h);
          for (int64_t j = 0; j < per; ++j) {
            uint8_t* at = bytes.data() + size * (i * per + j);
            if (dtype == DType::F32) std::memcpy(at, &v, 4);
            else {
              const uint16_t out = dtype == DType::F16 ? f32_to_f16(v) : h;
              if (dtype == DType::F16) {
                EXPECT_EQ(f16_to_f32(out), v) << t.name;
              }
              std::memcpy(at, &out, 2);
            }
          }
        }
        t.dtype = dtype;
        t.shape = {rows, groups * per};
        t.bytes = std::move(bytes);
      }
    });
  };
  const auto set_group = [](const fs::path& dir, int64_t group) {
    json c = json::parse(std::ifstream(dir / "config.json"));
    c["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] = group;
    std::ofstream(dir / "config.json") << c.dump(2);
  };
  const fs::path f32 = rescaled("enc_int4g_f32", DType::F32, 128), f16 = rescaled("enc_int4g_f16", DType::F16, 128),
                 g64 = rescaled("enc_int4g_g64", DType::BF16, 64);
  set_group(g64, 64);
  // Groups of 64 where config.json says 128: refused, naming the scale and both sizes.
  expect_load_error(rescaled("enc_int4g_contradicted", DType::BF16, 64),
                    {"layers.0.ffn.experts.0.w1.weight_scale", "shape [128, 4]: groups of 64 inputs", "group_size 128"});
  EXPECT_EQ(module(inspect(base), "routed experts")["encoding"], "INT4 100%");
  const json want = generate(base, 0)["tokens"];
  const auto a = logits(base);
  for (const fs::path& dir : {f32, f16, g64}) {
    EXPECT_EQ(module(inspect(dir), "routed experts")["encoding"], "INT4G 100%") << dir;
    EXPECT_EQ(generate(dir, 0)["tokens"], want) << dir;
    const auto b = logits(dir);
    EXPECT_LT(max_row_rel_l2(a.first, b.first), 2e-3) << dir;
    EXPECT_LT(max_row_rel_l2(a.second, b.second), 2e-3) << dir;
  }  // (logits last: `score` writes its file into the model's folder)
}

}  // namespace
}  // namespace dsv4

#include "checkpoint/transcode.h"
#include "checkpoint/name_match.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors_writer.h"
#include "checkpoint/weight_quantizer.h"
#include "core/error.h"
#include "core/number_formats.h"
#include "io/config.h"
#include "io/config_hf.h"
#include "io/safetensors.h"
#include "model/tensor_names.h"

namespace dsv4 {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kEncodingNames[] = {"release", "bf16", "hf-bf16", "fp8-experts", "nvfp4", "ct-nvfp4", "ct-fp8", "ct-int4"};
constexpr int kEncodings = int(sizeof(kEncodingNames) / sizeof(kEncodingNames[0]));


// One output tensor: its declaration and how to produce its bytes (called once, in order).
struct OutputTensor {
  TensorDecl decl;
  std::function<std::vector<uint8_t>()> bytes;
};

std::vector<uint8_t> copy_of(const TensorInfo& t) { return {t.data, t.data + t.nbytes}; }

// A block-scaled release weight: [rows, cols] values.
struct ScaledWeight {
  const TensorInfo* codes;
  const TensorInfo* scale;
  bool fp4;
  int64_t rows, cols;

  std::vector<float> values() const {
    std::vector<float> v(size_t(rows * cols));
    if (fp4) dequantize_fp4_blocks(codes->data, scale->data, rows, cols, v.data());
    else dequantize_fp8_blocks(codes->data, scale->data, rows, cols, v.data());
    return v;
  }
};

std::vector<uint8_t> to_bf16_exact(const ScaledWeight& w) {
  const std::vector<float> v = w.values();
  std::vector<uint8_t> out(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = f32_to_bf16(v[i]);
    DSV4_CHECK(bf16_to_f32(h) == v[i], "transcode: '", w.codes->name, "' value ", v[i], " at ", i,
               " is not a BF16 value");
    std::memcpy(&out[i * 2], &h, 2);
  }
  return out;
}

std::vector<uint8_t> bf16_to_f32_bytes(const TensorInfo& t) {
  std::vector<uint8_t> out(size_t(t.numel()) * 4);
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint16_t h;
    std::memcpy(&h, t.data + i * 2, 2);
    const float f = bf16_to_f32(h);
    std::memcpy(&out[size_t(i) * 4], &f, 4);
  }
  return out;
}

// MXFP4 [rows, cols] (one E8M0 per 32 inputs of a row) -> e4m3 codes + one E8M0 per 128x128 tile.
// Tile scale = the tile's largest block scale / 2^6 (6 · 2^6 = 384 <= 448), as the release's
// convert.py; every code is checked to hold its value exactly.
void fp4_to_fp8_tiles(const ScaledWeight& w, std::vector<uint8_t>& codes, std::vector<uint8_t>& tiles) {
  const int64_t tr = (w.rows + kFp8Block - 1) / kFp8Block, tc = (w.cols + kFp8Block - 1) / kFp8Block;
  const int64_t scale_cols = w.cols / kFp4Block;
  codes.assign(size_t(w.rows * w.cols), 0);
  tiles.assign(size_t(tr * tc), 0);
  for (int64_t bi = 0; bi < tr; ++bi)
    for (int64_t bj = 0; bj < tc; ++bj) {
      const int64_t r0 = bi * kFp8Block, r1 = std::min(w.rows, r0 + kFp8Block);
      const int64_t c0 = bj * kFp8Block, c1 = std::min(w.cols, c0 + kFp8Block);
      int smax = 0;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t b = c0 / kFp4Block; b < c1 / kFp4Block; ++b) smax = std::max<int>(smax, w.scale->data[r * scale_cols + b]);
      const int t = std::max(smax - 6, 0);
      tiles[size_t(bi * tc + bj)] = uint8_t(t);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) {
          const int s = w.scale->data[r * scale_cols + c / kFp4Block];
          const float v = std::ldexp(fp4_packed_at(w.codes->data + r * (w.cols / 2), c), s - t);
          const uint8_t code = f32_to_e4m3(v);
          DSV4_CHECK(e4m3_to_f32(code) == v, "transcode: '", w.codes->name, "' [", r, ", ", c,
                     "] cannot be recast to FP8 exactly: its block scale is 2^", smax - s,
                     " below the tile's largest (up to 2^14 is exact)");
          codes[size_t(r * w.cols + c)] = code;
        }
    }
}

bool is_routed_expert(const std::string& release_name) { return release_name.find(".ffn.experts.") != std::string::npos; }
bool is_target_routed_expert(const std::string& name) { return name.rfind("layers.", 0) == 0 && is_routed_expert(name); }

std::vector<uint8_t> f32_bytes(float v) {
  std::vector<uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}

// MXFP4 -> NVFP4: the same e2m1 bytes; each 32-wide E8M0 scale 2^(s-127) becomes two E4M3 scales
// 2^(s-127) / g with one global g = 2^(smax-127-8) for the tensor (so the largest block scale is
// 2^8, inside E4M3's range; blocks down to 2^-17 below it stay exact). Returns g.
float fp4_to_nvfp4_scales(const ScaledWeight& w, std::vector<uint8_t>& scales) {
  const int64_t blocks = w.cols / kFp4Block;
  int smax = 0;
  for (int64_t i = 0; i < w.rows * blocks; ++i) smax = std::max<int>(smax, w.scale->data[i]);
  scales.resize(size_t(w.rows * blocks * 2));
  for (int64_t i = 0; i < w.rows * blocks; ++i) {
    const int s = w.scale->data[i];
    const float v = std::ldexp(1.0f, s - smax + 8);
    const uint8_t code = f32_to_e4m3(v);
    DSV4_CHECK(e4m3_to_f32(code) == v, "transcode: '", w.scale->name, "' entry ", i, " (2^", s - 127,
               ") lies too far below the tensor's largest scale for an E4M3 block scale");
    scales[size_t(2 * i)] = scales[size_t(2 * i + 1)] = code;
  }
  return std::ldexp(1.0f, smax - 127 - 8);
}

// The compressors' and the indexer's projections, BF16 in the release: FP8 blocks in W4A16-FP8.
bool is_fp8_in_w4a16(const std::string& name) {
  return name.rfind("layers.", 0) == 0 &&
         (ends_with(name, ".attn.compressor.wkv.weight") || ends_with(name, ".attn.compressor.wgate.weight") ||
          ends_with(name, ".attn.indexer.compressor.wkv.weight") || ends_with(name, ".attn.indexer.compressor.wgate.weight") ||
          ends_with(name, ".attn.indexer.weights_proj.weight"));
}

// A BF16 matrix as compressed-tensors FP8 blocks (llm-compressor's FP8_BLOCK with ue8m0 scales):
// e4m3 codes (RNE) and an F32 multiplier per 128x128 tile, the power of two at or above amax/448.
void push_fp8_blocks(std::vector<OutputTensor>& out, const std::string& prefix, const TensorInfo& t) {
  const int64_t rows = t.shape.at(0), cols = t.shape.at(1);
  const int64_t tr = (rows + kFp8Block - 1) / kFp8Block, tc = (cols + kFp8Block - 1) / kFp8Block;
  auto scales = std::make_shared<std::vector<float>>(size_t(tr * tc));
  const TensorInfo* info = &t;
  out.push_back({{prefix + ".weight", DType::F8_E4M3, {rows, cols}}, [info, rows, cols, tc, scales] {
                   const auto at = [&](int64_t r, int64_t c) {
                     uint16_t h;
                     std::memcpy(&h, info->data + 2 * (r * cols + c), 2);
                     return bf16_to_f32(h);
                   };
                   std::vector<uint8_t> codes(size_t(rows * cols));
                   for (int64_t r0 = 0; r0 < rows; r0 += kFp8Block)
                     for (int64_t c0 = 0; c0 < cols; c0 += kFp8Block) {
                       const int64_t r1 = std::min(rows, r0 + kFp8Block), c1 = std::min(cols, c0 + kFp8Block);
                       float amax = 0;
                       for (int64_t r = r0; r < r1; ++r)
                         for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(at(r, c)));
                       const float s = pow2_ceil(std::max(amax, 1e-30f) / 448.0f);
                       (*scales)[size_t((r0 / kFp8Block) * tc + c0 / kFp8Block)] = s;
                       for (int64_t r = r0; r < r1; ++r)
                         for (int64_t c = c0; c < c1; ++c) codes[size_t(r * cols + c)] = f32_to_e4m3(at(r, c) / s);
                     }
                   return codes;
                 }});
  out.push_back({{prefix + ".weight_scale", DType::F32, {tr, tc}}, [scales] {  // (filled by the codes' call)
                   std::vector<uint8_t> b(scales->size() * 4);
                   std::memcpy(b.data(), scales->data(), b.size());
                   return b;
                 }});
}

// INT4 (W4A16) of a weight's values (quantize_int4_rows), packed 8 per int32, lowest bits first
// (= two per byte, low nibble first, little-endian).
void push_int4(std::vector<OutputTensor>& out, const std::string& prefix, const ScaledWeight& w) {
  auto scales = std::make_shared<std::vector<uint8_t>>();
  out.push_back({{prefix + ".weight_packed", DType::I32, {w.rows, w.cols / 8}}, [w, scales] {
                   const std::vector<float> v = w.values();
                   std::vector<uint8_t> packed(size_t(w.rows * w.cols / 2), 0);
                   scales->assign(size_t(w.rows * (w.cols / kInt4Group) * 2), 0);
                   quantize_int4_rows(v.data(), w.rows, w.cols, packed.data(), scales->data());
                   return packed;
                 }});
  out.push_back({{prefix + ".weight_scale", DType::BF16, {w.rows, w.cols / kInt4Group}}, [scales] { return *scales; }});
  const int64_t rows = w.rows, cols = w.cols;
  out.push_back({{prefix + ".weight_shape", DType::I64, {2}}, [rows, cols] {
                   std::vector<uint8_t> b(16);
                   std::memcpy(b.data(), &rows, 8);
                   std::memcpy(b.data() + 8, &cols, 8);
                   return b;
                 }});
}

// The NVFP4 tensors of one MXFP4 weight, ModelOpt's (weight U8, weight_scale, weight_scale_2 [],
// input_scale []) or compressed-tensors' (weight_packed, weight_scale, weight_global_scale [1]
// holding 1/g, input_global_scale [1]).
void push_nvfp4(std::vector<OutputTensor>& out, const std::string& prefix, const ScaledWeight& w, bool ct) {
  auto scales = std::make_shared<std::vector<uint8_t>>();
  auto global = std::make_shared<float>(0.0f);
  out.push_back({{prefix + (ct ? ".weight_packed" : ".weight"), DType::U8, {w.rows, w.cols / 2}}, [w, scales, global] {
                   *global = fp4_to_nvfp4_scales(w, *scales);
                   return copy_of(*w.codes);
                 }});
  out.push_back({{prefix + ".weight_scale", DType::F8_E4M3, {w.rows, w.cols / kNvfp4Block}}, [scales] { return *scales; }});
  if (ct) {
    out.push_back({{prefix + ".weight_global_scale", DType::F32, {1}}, [global] { return f32_bytes(1.0f / *global); }});
    out.push_back({{prefix + ".input_global_scale", DType::F32, {1}}, [] { return f32_bytes(1.0f); }});
  } else {
    out.push_back({{prefix + ".weight_scale_2", DType::F32, {}}, [global] { return f32_bytes(*global); }});
    out.push_back({{prefix + ".input_scale", DType::F32, {}}, [] { return f32_bytes(1.0f); }});
  }
}

std::vector<OutputTensor> plan_outputs(const TensorIndex& index, CheckpointEncoding e) {
  std::vector<OutputTensor> out;
  const bool all_bf16 = e == CheckpointEncoding::Bf16 || e == CheckpointEncoding::HfBf16;
  const bool hf = e == CheckpointEncoding::HfBf16;
  const bool ct = e == CheckpointEncoding::CtNvfp4 || e == CheckpointEncoding::CtFp8 || e == CheckpointEncoding::CtInt4;
  const bool int4 = e == CheckpointEncoding::CtInt4;
  const bool float_scales = e == CheckpointEncoding::CtFp8 || int4;
  // The drafter's FP8/FP4 weights in BF16 (the recipes `ignore` mtp.*, and the exports keep it
  // unquantized): the MTP module's, and a DSpark drafter's stages (main_proj included) alike.
  const bool mtp_bf16 = e == CheckpointEncoding::CtNvfp4 || int4;
  auto name_of = [&](const std::string& release) {
    if (hf) return hf_tensor_name(release);
    // compressed-tensors conversions keep the HF name of the gate's bias
    if (ct && ends_with(release, ".ffn.gate.bias")) return release.substr(0, release.size() - 4) + "e_score_correction_bias";
    return release;
  };
  for (const auto& [name, t] : index.all()) {
    const TensorInfo* info = t;
    if (ends_with(name, ".scale") && index.find(name.substr(0, name.size() - 6) + ".weight")) continue;  // with its weight
    const TensorInfo* scale =
        ends_with(name, ".weight") ? index.find(name.substr(0, name.size() - 7) + ".scale") : nullptr;
    if (!scale) {
      // Norms as transformers keeps them (F32); everything else as stored.
      if (int4 && is_fp8_in_w4a16(name) && info->dtype == DType::BF16)
        push_fp8_blocks(out, name.substr(0, name.size() - 7), *info);
      else if ((hf && ends_with(name, "norm.weight") && info->dtype == DType::BF16) ||
          (int4 && name == "head.weight" && info->dtype == DType::BF16))  // the W4A16 export's F32 head
        out.push_back({{name_of(name), DType::F32, info->shape}, [info] { return bf16_to_f32_bytes(*info); }});
      else
        out.push_back({{name_of(name), info->dtype, info->shape}, [info] { return copy_of(*info); }});
      continue;
    }
    const bool fp4 = info->dtype != DType::F8_E4M3;
    const ScaledWeight w{info, scale, fp4, info->shape.at(0), info->shape.at(1) * (fp4 ? 2 : 1)};
    const bool bf16 = all_bf16 || (mtp_bf16 && name.rfind("mtp.", 0) == 0) ||
                      (int4 && name.find(".ffn.shared_experts.") != std::string::npos);
    const std::string prefix = name.substr(0, name.size() - 7);
    if (int4 && fp4 && is_target_routed_expert(name)) {
      push_int4(out, prefix, w);
    } else if ((e == CheckpointEncoding::Nvfp4 || ct) && fp4 && is_target_routed_expert(name)) {
      push_nvfp4(out, prefix, w, ct);
    } else if (bf16) {
      out.push_back({{name_of(name), DType::BF16, {w.rows, w.cols}}, [w] { return to_bf16_exact(w); }});
    } else if (float_scales && !fp4) {  // E8M0 2^(e-127) as an F32 multiplier: exact
      out.push_back({{name, info->dtype, info->shape}, [info] { return copy_of(*info); }});
      out.push_back({{prefix + ".weight_scale", DType::F32, scale->shape}, [scale] {
                       std::vector<uint8_t> b(size_t(scale->numel()) * 4);
                       for (int64_t i = 0; i < scale->numel(); ++i) {
                         const float v = e8m0_to_f32(scale->data[i]);
                         std::memcpy(&b[size_t(i) * 4], &v, 4);
                       }
                       return b;
                     }});
    } else if (e == CheckpointEncoding::Fp8Experts && fp4 && is_routed_expert(name)) {
      // Both outputs from one conversion: the weight's call fills the scale's bytes too.
      auto tiles = std::make_shared<std::vector<uint8_t>>();
      out.push_back({{name, DType::F8_E4M3, {w.rows, w.cols}}, [w, tiles] {
                       std::vector<uint8_t> codes;
                       fp4_to_fp8_tiles(w, codes, *tiles);
                       return codes;
                     }});
      out.push_back({{scale->name, DType::F8_E8M0,
                      {(w.rows + kFp8Block - 1) / kFp8Block, (w.cols + kFp8Block - 1) / kFp8Block}},
                     [tiles] { return *tiles; }});
    } else {
      out.push_back({{name, info->dtype, info->shape}, [info] { return copy_of(*info); }});
      out.push_back({{scale->name, scale->dtype, scale->shape}, [scale] { return copy_of(*scale); }});
    }
  }
  // compressed-tensors MTP checkpoints carry copies of the embedding and head for vLLM's MTP loader.
  // A DSpark drafter gets none: its loaders read the target's embed.weight and head.weight (0731
  // ships no copies), so copies would only add two dead vocabulary-sized tensors.
  const TensorInfo* embed = index.find("embed.weight");
  const TensorInfo* head = index.find("head.weight");
  if (mtp_bf16 && index.find("mtp.0.enorm.weight") && embed && head) {
    out.push_back({{"mtp.0.emb.tok_emb.weight", embed->dtype, embed->shape}, [embed] { return copy_of(*embed); }});
    out.push_back({{"mtp.0.head.weight", head->dtype, head->shape}, [head] { return copy_of(*head); }});
  }
  return out;
}

json output_config(const ModelConfig& c, CheckpointEncoding e) {
  switch (e) {
    case CheckpointEncoding::Release: return c.to_json();
    case CheckpointEncoding::Bf16: {
      json j = c.to_json();
      j.erase("quantization_config");
      j.erase("expert_dtype");
      return j;
    }
    case CheckpointEncoding::HfBf16: {
      json j = to_hf_config_json(c);
      j.erase("quantization_config");
      j.erase("expert_dtype");
      return j;
    }
    case CheckpointEncoding::Fp8Experts: {
      json j = c.to_json();
      j["expert_dtype"] = "fp8";
      return j;
    }
    case CheckpointEncoding::Nvfp4: return c.to_json();  // hf_quant_config.json describes the experts
    case CheckpointEncoding::CtNvfp4:
    case CheckpointEncoding::CtFp8:
    case CheckpointEncoding::CtInt4: {
      json j = c.to_json();
      // The routed experts' 4-bit group: NVFP4 (float, 16) or, in W4A16, INT4 (int, symmetric, 128);
      // W4A16-FP8 adds its FP8 blocks (attention, compressors, indexer) with dynamic activations.
      const bool int4 = e == CheckpointEncoding::CtInt4;
      const json experts =
          int4 ? json{{"targets", {"re:.*ffn\\.experts\\..*"}},
                      {"format", "pack-quantized"},
                      {"weights", {{"num_bits", 4}, {"type", "int"}, {"symmetric", true}, {"strategy", "group"},
                                   {"group_size", kInt4Group}}}}
               : json{{"targets", {"re:.*ffn\\.experts\\..*"}},
                      {"format", "nvfp4-pack-quantized"},
                      {"weights", {{"num_bits", 4}, {"type", "float"}, {"strategy", "tensor_group"}, {"group_size", 16}}}};
      json groups = {{"group_0", experts}};
      if (int4)
        groups["group_1"] = {{"targets", {"re:.*attn\\.(wq_a|wq_b|wkv|wo_a|wo_b)$", "re:.*compressor\\.(wkv|wgate)$",
                                          "re:.*indexer\\.(wq_b|weights_proj)$"}},
                             {"format", "float-quantized"},
                             {"weights", {{"num_bits", 8}, {"type", "float"}, {"strategy", "block"},
                                          {"block_structure", {kFp8Block, kFp8Block}}}},
                             {"input_activations", {{"num_bits", 8}, {"type", "float"}, {"strategy", "group"},
                                                    {"group_size", kFp8Block}, {"dynamic", true}}}};
      j["quantization_config"] = {{"quant_method", "compressed-tensors"},
                                  {"format", "mixed-precision"},
                                  {"config_groups", std::move(groups)},
                                  {"ignore", {"lm_head", "re:.*mtp\\..*"}}};
      return j;
    }
  }
  return c.to_json();
}

}  // namespace

CheckpointEncoding parse_checkpoint_encoding(const std::string& name) {
  for (int i = 0; i < kEncodings; ++i)
    if (name == kEncodingNames[i]) return CheckpointEncoding(i);
  throw Error(cat("unknown encoding '", name, "'; known: ", checkpoint_encoding_names()));
}

const char* checkpoint_encoding_name(CheckpointEncoding e) { return kEncodingNames[int(e)]; }

std::string checkpoint_encoding_names() {
  std::string s;
  for (const char* n : kEncodingNames) s += (s.empty() ? "" : "|") + std::string(n);
  return s;
}

TranscodeResult transcode_checkpoint(const fs::path& src, const fs::path& out, CheckpointEncoding encoding,
                                     uint64_t max_shard_bytes, int min_shards) {
  const ModelConfig config = load_config(src / "config.json");
  const TensorStore store = TensorStore::open(src);
  const TensorIndex index(store);
  DSV4_CHECK(index.naming() == TensorNaming::Release, src.string(), ": transcode reads release-named checkpoints");
  std::vector<OutputTensor> outputs = plan_outputs(index, encoding);
  std::vector<TensorDecl> decls;
  for (const OutputTensor& o : outputs) decls.push_back(o.decl);

  std::error_code ec;
  fs::create_directories(out, ec);
  DSV4_CHECK(fs::is_directory(out), out.string(), ": cannot create the output directory");
  ShardedWriter writer(out, plan_shards(decls, max_shard_bytes, min_shards));
  for (OutputTensor& o : outputs) {
    const std::vector<uint8_t> bytes = o.bytes();
    DSV4_CHECK(bytes.size() == o.decl.nbytes(), "transcode: '", o.decl.name, "' produced ", bytes.size(),
               " bytes; expected ", o.decl.nbytes());
    writer.write_tensor(o.decl.name, bytes.data(), bytes.size());
  }
  writer.finish();
  const fs::path config_path = out / "config.json";
  std::ofstream cfg(config_path);
  cfg << output_config(config, encoding).dump(2) << "\n";
  cfg.close();
  DSV4_CHECK(cfg.good(), config_path.string(), ": cannot write");
  if (encoding == CheckpointEncoding::Nvfp4) {  // as NVIDIA's ModelOpt exports describe themselves
    const json quant = {{"producer", {{"name", "modelopt"}}},
                        {"quantization", {{"quant_algo", "NVFP4"}, {"group_size", 16},
                                          {"exclude_modules", {"*.attn.*", "*.ffn.shared_experts.*", "head", "mtp.*"}}}}};
    std::ofstream(out / "hf_quant_config.json") << quant.dump(2) << "\n";
  }

  TranscodeResult r;
  r.bytes = writer.total_bytes() + fs::file_size(config_path);
  r.shards = writer.num_shards();
  r.tensors = outputs.size();
  return r;
}

}  // namespace dsv4

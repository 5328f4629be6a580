// Binding a checkpoint's tensors to the model's weight views (weights.h: bind_weights,
// check_weights): tensors found by release name in either naming family, each matrix's encoding
// read from its own tensors, every shape checked against the geometry the config implies.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_set>

#include "core/error.h"
#include "core/number_formats.h"
#include "model/weight_walk.h"
#include "model/weights.h"

namespace dsv4 {

namespace {

using weight_walk::dtypes_string;
using weight_walk::scale_shape;
using weight_walk::shape_string;
using weight_walk::Walk;
using weight_walk::code_shape;

// Binds views, validating each tensor against its spec and reading each matrix's encoding from
// its tensors (bind_weights). Problems throw, or are collected when `check` is set.
struct Binder {
  const TensorIndex& index;
  const ModelConfig& c;
  WeightCheck* check = nullptr;
  std::string current_group;
  std::unordered_set<std::string> used;  // release names taken
  ModelWeights* weights = nullptr;        // owns widened copies

  void group(const std::string& g) { current_group = g; }

  const TensorInfo* take(const std::string& name) {
    const TensorInfo* t = index.find(name);
    if (t && used.insert(name).second && check) check->group_bytes[current_group] += t->nbytes;
    return t;
  }
  // detail: what was found, what was expected ("dtype U8, expected F8_E8M0").
  void problem(const TensorInfo& t, const std::string& detail) {
    if (!check) throw Error(cat(*t.file, ": tensor '", t.name, "': ", detail));
    check->problems.push_back({t.name, *t.file, detail});
  }
  void missing(const std::string& name) {
    if (!check) {
      const std::string hf = index.naming() == TensorNaming::HuggingFace ? cat(" (or '", hf_tensor_name(name), "')") : "";
      throw Error(cat(index.store().root().string(), ": missing tensor '", name, "'", hf));
    }
    check->missing.push_back(name);
  }

  // An F32 copy of a small BF16 or F16 tensor, owned by the weights being bound.
  const uint8_t* widened(const TensorInfo& t) {
    auto copy = std::make_shared<std::vector<float>>(size_t(t.numel()));
    for (size_t i = 0; i < copy->size(); ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      (*copy)[i] = t.dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
    const uint8_t* data = reinterpret_cast<const uint8_t*>(copy->data());
    weights->widened.push_back(std::move(copy));
    return data;
  }

  bool has_shape(const TensorInfo& t, const std::vector<int64_t>& shape, const std::string& what) {
    if (t.shape == shape) return true;
    problem(t, cat("shape ", t.shape_string(), ", expected ", TensorInfo{t.name, t.dtype, shape}.shape_string(),
                   what.empty() ? "" : " (" + what + ")"));
    return false;
  }

  static WeightFormat format_of(DType d) {
    switch (d) {
      case DType::BF16: return WeightFormat::BF16;
      case DType::I64: return WeightFormat::I64;
      case DType::I32: return WeightFormat::I32;
      default: return WeightFormat::F32;
    }
  }

  void plain(WeightView& w, const std::string& name, std::vector<int64_t> shape, std::vector<DType> dtypes) {
    const TensorInfo* t = take(name);
    if (!t) return missing(name);
    bool ok = false;
    for (DType d : dtypes) ok |= t->dtype == d;
    if (!ok) return problem(*t, cat("dtype ", dtype_name(t->dtype), ", expected ", dtypes_string(dtypes)));
    if (!has_shape(*t, shape, "")) return;
    w.label = t->name;
    w.format = format_of(t->dtype);
    w.data = t->data;
    if (t->dtype == DType::BF16 && dtypes.front() == DType::F32) {  // widened: the ops read floats
      w.format = WeightFormat::F32;
      w.data = widened(*t);
    }
    w.rows = shape.size() == 2 ? shape[0] : 1;
    w.cols = shape.back();
  }

  // A [rows, cols] matrix in whichever encoding its tensors show.
  void linear(WeightView& w, const std::string& p, int64_t rows, int64_t cols) {
    const std::string geometry = cat("a [", rows, ", ", cols, "] weight");
    const TensorInfo* packed = take(p + ".weight_packed");
    const TensorInfo* codes = take(p + ".weight");
    const TensorInfo* scale = take(p + ".scale");
    const TensorInfo* weight_scale = take(p + ".weight_scale");
    const TensorInfo* weight_scale_inv = take(p + ".weight_scale_inv");
    const TensorInfo* scale_2 = take(p + ".weight_scale_2");
    const TensorInfo* shape = take(p + ".weight_shape");
    const TensorInfo* global_scale = take(p + ".weight_global_scale");
    take(p + ".input_scale");         // activation scales of W4A4 recipes: weight-only here
    take(p + ".input_global_scale");
    if (packed) {
      if (packed->dtype == DType::I32 || shape) return int4(w, *packed, weight_scale, shape, p, rows, cols, geometry);
      return nvfp4(w, *packed, weight_scale, global_scale, p + ".weight_global_scale", true, rows, cols, geometry);
    }
    if (!codes) return missing(p + ".weight");
    if (scale_2) return nvfp4(w, *codes, weight_scale, scale_2, p + ".weight_scale_2", false, rows, cols, geometry);
    const TensorInfo* float_scale = weight_scale ? weight_scale : weight_scale_inv;
    if (scale && float_scale)
      return problem(*codes, cat("two scale companions, '", scale->name, "' and '", float_scale->name, "'"));
    if (scale) return block_scaled(w, *codes, *scale, rows, cols, geometry);
    if (float_scale) {
      if (codes->dtype == DType::F8_E4M3) return fp8_float_scales(w, *codes, *float_scale, rows, cols, geometry);
      if ((codes->dtype == DType::U8 || codes->dtype == DType::I8) && float_scale->dtype == DType::F8_E4M3)
        return problem(*codes, cat("NVFP4 codes without their global scale, expected '", p,
                                   ".weight_scale_2' F32 [] (ModelOpt; compressed-tensors names the codes weight_packed)"));
      return problem(*codes, cat("dtype ", dtype_name(codes->dtype), " beside the scale '", float_scale->name,
                                 "', expected F8_E4M3 codes (no known encoding has this pair)"));
    }
    switch (codes->dtype) {
      case DType::BF16:
      case DType::F32:
        if (!has_shape(*codes, {rows, cols}, geometry)) return;
        w = WeightView{format_of(codes->dtype), rows, cols, codes->data, nullptr, 0, codes->name};
        return;
      case DType::F8_E4M3:
        return problem(*codes, cat("F8_E4M3 codes without their scale, expected '", p, ".scale' F8_E8M0 ",
                                   shape_string(scale_shape(WeightFormat::FP8, rows, cols)), " (one per 128x128 tile)"));
      case DType::I8:
      case DType::U8:
        return problem(*codes, cat("packed e2m1 pairs without their scale, expected '", p, ".scale' F8_E8M0 ",
                                   shape_string(scale_shape(WeightFormat::FP4, rows, cols)), " (one per 32 inputs)"));
      default:
        return problem(*codes, cat("dtype ", dtype_name(codes->dtype),
                                   ", expected BF16, F32, F8_E4M3 + .scale (FP8) or I8/U8 + .scale (FP4)"));
    }
  }

  void block_scaled(WeightView& w, const TensorInfo& codes, const TensorInfo& scale, int64_t rows, int64_t cols,
                    const std::string& geometry) {
    WeightFormat f;
    if (codes.dtype == DType::F8_E4M3) f = WeightFormat::FP8;
    else if (codes.dtype == DType::I8 || codes.dtype == DType::U8) f = WeightFormat::FP4;
    else
      return problem(codes, cat("dtype ", dtype_name(codes.dtype), " beside the scale '", scale.name,
                                "', expected F8_E4M3 (FP8, 128x128 tiles) or I8/U8 (FP4 pairs, 32 inputs per scale)"));
    const char* layout = f == WeightFormat::FP8 ? "FP8 codes of " : "FP4 pairs of ";
    if (!has_shape(codes, code_shape(f, rows, cols), layout + geometry)) return;
    if (scale.dtype != DType::F8_E8M0)
      return problem(scale, cat("dtype ", dtype_name(scale.dtype), ", expected F8_E8M0 (the scale of ", codes.name, ")"));
    const char* blocks = f == WeightFormat::FP8 ? "one E8M0 per 128x128 tile of " : "one E8M0 per 32 inputs of ";
    if (!has_shape(scale, scale_shape(f, rows, cols), blocks + geometry)) return;
    w = WeightView{f, rows, cols, codes.data, scale.data, weight_scale_cols(f, cols), codes.name};
  }

  // NVFP4: e2m1 pairs [rows, cols/2], an E4M3 scale per 16 inputs ([rows, cols/16]) and one F32
  // factor for the tensor: ModelOpt's weight_scale_2 multiplies, compressed-tensors'
  // weight_global_scale is stored inverted (divide).
  void nvfp4(WeightView& w, const TensorInfo& codes, const TensorInfo* block_scale, const TensorInfo* global,
             const std::string& global_name, bool inverted, int64_t rows, int64_t cols, const std::string& geometry) {
    if (codes.dtype != DType::U8 && codes.dtype != DType::I8)
      return problem(codes, cat("dtype ", dtype_name(codes.dtype), ", expected U8 (NVFP4: two e2m1 codes per byte)"));
    if (!has_shape(codes, {rows, cols / 2}, "NVFP4 pairs of " + geometry)) return;
    if (!block_scale) {
      const std::string name = codes.name.substr(0, codes.name.rfind('.')) + ".weight_scale";
      return problem(codes, cat("NVFP4 codes without their block scales, expected '", name, "' F8_E4M3 [", rows, ", ",
                                cols / kNvfp4Block, "] (one per 16 inputs)"));
    }
    if (block_scale->dtype != DType::F8_E4M3)
      return problem(*block_scale, cat("dtype ", dtype_name(block_scale->dtype), ", expected F8_E4M3 (the NVFP4 block scales of ",
                                       codes.name, ")"));
    if (!has_shape(*block_scale, {rows, cols / kNvfp4Block}, "one E4M3 per 16 inputs of " + geometry)) return;
    if (!global)
      return problem(codes, cat("NVFP4 codes without their global scale, expected '", global_name, "' F32 []"));
    if (global->dtype != DType::F32 || global->numel() != 1)
      return problem(*global, cat("dtype ", dtype_name(global->dtype), " shape ", global->shape_string(),
                                  ", expected F32 [] or [1] (the global scale of ", codes.name, ")"));
    float g;
    std::memcpy(&g, global->data, 4);
    if (!(std::isfinite(g) && g > 0))
      return problem(*global, cat("value ", g, ", expected a positive finite global scale"));
    w = WeightView{WeightFormat::NVFP4, rows, cols, codes.data, block_scale->data, cols / kNvfp4Block, codes.name,
                   inverted ? 1.0f / g : g};
  }

  // compressed-tensors pack-quantized INT4 (W4A16, symmetric): int32 words [rows, cols/8], a
  // scale per group of inputs ([rows, cols/group]), weight_shape = the logical [rows, cols]. BF16
  // scales per 128 (canada-quant's, GPTQ's default) run on the vector kernels (INT4); any other group
  // or F16/F32 scales on the generic ones (INT4G, scales widened to F32). The group is read from the
  // scale's shape and must be what config.json's config_groups states, where it states one.
  void int4(WeightView& w, const TensorInfo& packed, const TensorInfo* scale, const TensorInfo* shape,
            const std::string& p, int64_t rows, int64_t cols, const std::string& geometry) {
    if (packed.dtype != DType::I32)
      return problem(packed, cat("dtype ", dtype_name(packed.dtype), ", expected I32 (INT4: eight 4-bit values per word)"));
    if (!has_shape(packed, {rows, cols / 8}, "INT4 words of " + geometry)) return;
    const int64_t stated = c.int4_group_size;
    const int64_t expected_group = stated > 0 ? stated : kInt4Group;
    if (!scale)
      return problem(packed, cat("INT4 codes without their scales, expected '", p, ".weight_scale' BF16, F16 or F32 [", rows,
                                 ", ", cols / expected_group, "]"));
    if (scale->dtype != DType::BF16 && scale->dtype != DType::F16 && scale->dtype != DType::F32)
      return problem(*scale, cat("dtype ", dtype_name(scale->dtype), ", expected BF16, F16 or F32 (the group scales of ",
                                 packed.name, ")"));
    const bool grouped = scale->shape.size() == 2 && scale->shape[0] == rows && scale->shape[1] > 0 &&
                         cols % scale->shape[1] == 0;
    if (!grouped) {
      has_shape(*scale, {rows, cols / expected_group}, cat("one scale per ", expected_group, " inputs of ", geometry));
      return;
    }
    const int64_t group = cols / scale->shape[1];
    if (stated > 0 && group != stated)
      return problem(*scale, cat("shape ", scale->shape_string(), ": groups of ", group, " inputs, but config.json's "
                                 "quantization_config states group_size ", stated));
    if (shape) {
      bool ok = (shape->dtype == DType::I64 || shape->dtype == DType::I32) && shape->numel() == 2;
      for (int64_t i = 0; ok && i < 2; ++i) {
        int64_t v = 0;
        if (shape->dtype == DType::I64) std::memcpy(&v, shape->data + i * 8, 8);
        else {
          int32_t v32;
          std::memcpy(&v32, shape->data + i * 4, 4);
          v = v32;
        }
        ok = v == (i == 0 ? rows : cols);
      }
      if (!ok) return problem(*shape, cat("does not hold [", rows, ", ", cols, "] (the logical shape of ", packed.name, ")"));
    }
    if (group == kInt4Group && scale->dtype == DType::BF16) {
      w = WeightView{WeightFormat::INT4, rows, cols, packed.data, scale->data, cols / kInt4Group, packed.name};
      return;
    }
    const uint8_t* scales = scale->dtype == DType::F32 ? scale->data : widened(*scale);
    w = WeightView{WeightFormat::INT4G, rows, cols, packed.data, scales, cols / group, packed.name};
    w.group = group;
  }

  // FP8 codes with a float multiplier per 128x128 tile (compressed-tensors' weight_scale, the
  // transformers fp8 weight_scale_inv: both multiply).
  void fp8_float_scales(WeightView& w, const TensorInfo& codes, const TensorInfo& scale, int64_t rows, int64_t cols,
                        const std::string& geometry) {
    if (!has_shape(codes, {rows, cols}, "FP8 codes of " + geometry)) return;
    const bool half = scale.dtype == DType::BF16 || scale.dtype == DType::F16;  // (BF16 per one recipe)
    if (scale.dtype != DType::F32 && !half)
      return problem(scale, cat("dtype ", dtype_name(scale.dtype), ", expected F32, BF16 or F16 (the block scales of ",
                                codes.name, ")"));
    if (!has_shape(scale, scale_shape(WeightFormat::FP8, rows, cols), "one scale per 128x128 tile of " + geometry)) return;
    // 16-bit scales are widened to F32 at load (1/16384 of the weight's bytes): one kernel per format.
    w = WeightView{WeightFormat::FP8F, rows, cols, codes.data, half ? widened(scale) : scale.data,
                   weight_scale_cols(WeightFormat::FP8F, cols), codes.name};
  }

  void fp8(WeightView& w, const std::string& p, int64_t rows, int64_t cols) { linear(w, p, rows, cols); }
  void dense(WeightView& w, const std::string& p, int64_t rows, int64_t cols) { linear(w, p, rows, cols); }
  void expert(WeightView& w, const std::string& p, int64_t rows, int64_t cols) { linear(w, p, rows, cols); }

  // The routed experts of a layer run with kernels chosen from expert 0's w1 and w2.
  void check_experts(const MoeWeights& ffn) {
    if (ffn.experts.empty() || !ffn.experts[0].w1.present()) return;
    const ExpertWeights& first = ffn.experts[0];
    for (const ExpertWeights& e : ffn.experts) {
      const std::pair<const WeightView*, const WeightView*> pairs[] = {{&e.w1, &first.w1}, {&e.w3, &first.w1},
                                                                        {&e.w2, &first.w2}};
      for (auto [view, like] : pairs) {
        if (!view->present() || view->format == like->format) continue;
        const TensorInfo* t = index.find(release_tensor_name(view->name()));
        if (t)
          problem(*t, cat("encoding ", weight_format_name(view->format), " while '", like->name(), "' is ",
                          weight_format_name(like->format), ": the routed experts of a layer must share one encoding"));
      }
    }
  }
};

bool mtp_present(const TensorIndex& index, const ModelConfig& config, int64_t i) {
  return i < config.num_nextn_predict_layers && index.find("mtp." + std::to_string(i) + ".enorm.weight") != nullptr;
}

// The mtp.N. prefixes a checkpoint stores, the MTP loaders' copies of embed/head aside: the
// largest N + 1. Counted from every tensor, not from one key per stage, so that a stage that lacks
// some of its tensors (even the one a key would pick) still counts and each missing tensor is
// reported by name.
int64_t mtp_prefixes_in(const TensorIndex& index) {
  int64_t n = 0;
  for (const auto& [name, t] : index.all()) {
    if (name.rfind("mtp.", 0) != 0 || is_mtp_alias(name)) continue;
    const size_t dot = name.find('.', 4);
    const std::string number = name.substr(4, dot == std::string::npos ? std::string::npos : dot - 4);
    if (number.empty() || number.size() > 6 || number.find_first_not_of("0123456789") != std::string::npos) continue;
    n = std::max<int64_t>(n, std::stoll(number) + 1);
  }
  return n;
}

// Whether the checkpoint holds tensors only a DSpark drafter has: stage 0's context projection,
// the last stage's Markov and confidence heads.
bool dspark_tensors_in(const TensorIndex& index) {
  for (const auto& [name, t] : index.all())
    if (name.rfind("mtp.", 0) == 0 &&
        (name.find(".main_proj.") != std::string::npos || name.find(".main_norm.") != std::string::npos ||
         name.find(".markov_head.") != std::string::npos || name.find(".confidence_head.") != std::string::npos))
      return true;
  return false;
}

// DSpark stages stored: 0 without DSpark-only tensors, else the mtp.N. prefixes.
int64_t dspark_stages_in(const TensorIndex& index) { return dspark_tensors_in(index) ? mtp_prefixes_in(index) : 0; }

// The drafter layers to bind: MTP modules, or the DSpark stages the config lists.
int64_t drafter_layers(const TensorIndex& index, const ModelConfig& config) {
  const std::string root = index.store().root().string();
  if (!config.has_dspark()) {
    DSV4_CHECK(!dspark_tensors_in(index), root, ": the checkpoint holds a DSpark drafter (mtp.0.main_proj, "
               "markov_head, confidence_head) but config.json has no dspark_* keys (dspark_block_size, "
               "dspark_noise_token_id, dspark_target_layer_ids, dspark_markov_rank)");
    int64_t num_mtp = 0;
    while (mtp_present(index, config, num_mtp)) ++num_mtp;
    return num_mtp;
  }
  DSV4_CHECK(!index.find("mtp.0.enorm.weight"), root, ": config.json describes a DSpark drafter (dspark_block_size ",
             config.dspark_block_size, ") but the checkpoint holds a classic MTP module (mtp.0.enorm.weight)");
  const int64_t stored = mtp_prefixes_in(index);
  if (stored == 0) return 0;  // a DSpark checkpoint without its drafter: the target alone
  DSV4_CHECK(stored <= config.num_drafter_layers(), root, ": the checkpoint holds tensors of ", stored,
             " DSpark stage(s) (mtp.0 .. mtp.", stored - 1, "), config.json's compress_ratios lists ",
             config.num_drafter_layers(), " after the ", config.num_hidden_layers, " target layers");
  // Every configured stage is bound: a stage stored in part (or not at all, below the last one
  // stored) has each of its missing tensors reported by name.
  return config.num_drafter_layers();
}

ModelWeights bind_all(const TensorIndex& index, const ModelConfig& config, WeightCheck* check) {
  const int64_t num_mtp = drafter_layers(index, config);
  ModelWeights w;
  Binder binder{index, config, check, {}, {}, &w};
  Walk<Binder>{binder, config}.model(w, num_mtp);
  for (const BlockWeights& b : w.layers) binder.check_experts(b.ffn);
  for (const MtpWeights& m : w.mtp) binder.check_experts(m.block.ffn);
  if (w.dspark)
    for (const BlockWeights& b : w.dspark->stages) binder.check_experts(b.ffn);
  if (check) {
    for (const auto& [name, t] : index.all()) {
      if (binder.used.count(name)) continue;
      if (is_mtp_alias(name)) check->aliases.push_back(t->name);
      else check->unexpected.push_back(t->name);
    }
  }
  return w;
}

}  // namespace

bool has_mtp_module(const TensorStore& store, const ModelConfig& config, int64_t index) {
  return !config.has_dspark() && mtp_present(TensorIndex(store), config, index);
}

int64_t dspark_stages_stored(const TensorStore& store) { return dspark_stages_in(TensorIndex(store)); }

ModelWeights bind_weights(const TensorStore& store, const ModelConfig& config) {
  return bind_all(TensorIndex(store), config, nullptr);
}

WeightCheck check_weights(const TensorStore& store, const ModelConfig& config) {
  const TensorIndex index(store);
  WeightCheck check;
  check.naming = index.naming();
  check.weights = bind_all(index, config, &check);
  return check;
}

}  // namespace dsv4

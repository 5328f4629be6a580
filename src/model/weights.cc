#include "model/weights.h"

#include <functional>

#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

namespace {

// The shapes of a block-scaled weight's two tensors (prefix.weight codes, prefix.scale E8M0),
// from the format's traits (FP8: codes [rows, cols]; FP4: two codes per byte [rows, cols/2]).
std::vector<int64_t> code_shape(WeightFormat f, int64_t rows, int64_t cols) {
  return {rows, cols * weight_format_traits(f).bits / 8};
}
std::vector<int64_t> scale_shape(WeightFormat f, int64_t rows, int64_t cols) {
  return {weight_scale_rows(f, rows), weight_scale_cols(f, cols)};
}
const std::vector<DType>& code_dtypes(WeightFormat f) {
  static const std::vector<DType> kFp8{DType::F8_E4M3}, kFp4{DType::I8, DType::U8};
  return f == WeightFormat::FP8 ? kFp8 : kFp4;
}

// The walk over every tensor of the checkpoint. It only adds what is missing (optional parts,
// vector sizes), so walking bound weights again keeps them (weight_views). `Visitor` provides
//   plain(view, name, shape, dtypes)          a tensor used as stored (F32/BF16/I64 ...)
//   fp8(view, prefix, rows, cols)             prefix.weight e4m3 + prefix.scale per 128x128
//   expert(view, prefix, rows, cols)          routed expert: FP4 (or FP8 when expert_dtype=fp8)
template <typename Visitor>
struct Walk {
  Visitor& v;
  const ModelConfig& c;

  void hc(HcWeights& w, const std::string& p, const char* site) {
    const int64_t mix = (2 + c.hc_mult) * c.hc_mult;
    v.plain(w.fn, p + "hc_" + site + "_fn", {mix, c.hc_mult * c.hidden_size}, {DType::F32});
    v.plain(w.base, p + "hc_" + site + "_base", {mix}, {DType::F32});
    v.plain(w.scale, p + "hc_" + site + "_scale", {3}, {DType::F32});
  }

  void hc_head(HcHeadWeights& w, const std::string& p) {
    v.plain(w.fn, p + "hc_head_fn", {c.hc_mult, c.hc_mult * c.hidden_size}, {DType::F32});
    v.plain(w.base, p + "hc_head_base", {c.hc_mult}, {DType::F32});
    v.plain(w.scale, p + "hc_head_scale", {1}, {DType::F32});
  }

  void norm(WeightView& w, const std::string& name, int64_t n) {
    v.plain(w, name, {n}, {DType::BF16, DType::F32});
  }

  void compressor(CompressorWeights& w, const std::string& p, int64_t ratio, int64_t width) {
    w.ratio = ratio;
    w.head_dim = width;
    w.overlap = ratio == 4;
    const int64_t proj = (w.overlap ? 2 : 1) * width;
    v.plain(w.ape, p + "ape", {ratio, proj}, {DType::F32});
    v.plain(w.wkv, p + "wkv.weight", {proj, c.hidden_size}, {DType::BF16, DType::F32});
    v.plain(w.wgate, p + "wgate.weight", {proj, c.hidden_size}, {DType::BF16, DType::F32});
    norm(w.norm, p + "norm.weight", width);
  }

  void attention(AttentionWeights& w, const std::string& p, int64_t ratio) {
    const int64_t D = c.hidden_size, H = c.num_attention_heads, d = c.head_dim;
    v.plain(w.attn_sink, p + "attn_sink", {H}, {DType::F32});
    v.fp8(w.wq_a, p + "wq_a", c.q_lora_rank, D);
    norm(w.q_norm, p + "q_norm.weight", c.q_lora_rank);
    v.fp8(w.wq_b, p + "wq_b", H * d, c.q_lora_rank);
    v.fp8(w.wkv, p + "wkv", d, D);
    norm(w.kv_norm, p + "kv_norm.weight", d);
    v.fp8(w.wo_a, p + "wo_a", c.o_groups * c.o_lora_rank, H * d / c.o_groups);
    v.fp8(w.wo_b, p + "wo_b", D, c.o_groups * c.o_lora_rank);
    if (ratio > 0) {
      if (!w.compressor) w.compressor.emplace();
      compressor(*w.compressor, p + "compressor.", ratio, d);
    }
    if (ratio == 4) {
      if (!w.indexer) w.indexer.emplace();
      const std::string ip = p + "indexer.";
      v.fp8(w.indexer->wq_b, ip + "wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank);
      v.plain(w.indexer->weights_proj, ip + "weights_proj.weight", {c.index_n_heads, D},
              {DType::BF16, DType::F32});
      compressor(w.indexer->compressor, ip + "compressor.", ratio, c.index_head_dim);
    }
  }

  void moe(MoeWeights& w, const std::string& p, bool hash) {
    const int64_t D = c.hidden_size, E = c.n_routed_experts, inter = c.moe_intermediate_size;
    v.plain(w.gate, p + "gate.weight", {E, D}, {DType::BF16, DType::F32});
    if (hash)
      v.plain(w.tid2eid, p + "gate.tid2eid", {c.vocab_size, c.num_experts_per_tok}, {DType::I64, DType::I32});
    else
      v.plain(w.bias, p + "gate.bias", {E}, {DType::F32});
    v.fp8(w.shared.w1, p + "shared_experts.w1", inter, D);
    v.fp8(w.shared.w2, p + "shared_experts.w2", D, inter);
    v.fp8(w.shared.w3, p + "shared_experts.w3", inter, D);
    w.experts.resize(size_t(E));
    for (int64_t e = 0; e < E; ++e) {
      const std::string ep = p + "experts." + std::to_string(e) + ".";
      v.expert(w.experts[size_t(e)].w1, ep + "w1", inter, D);
      v.expert(w.experts[size_t(e)].w2, ep + "w2", D, inter);
      v.expert(w.experts[size_t(e)].w3, ep + "w3", inter, D);
    }
  }

  void block(BlockWeights& w, const std::string& p, int64_t layer, bool hash) {
    w.layer = layer;
    w.compress_ratio = c.compress_ratio(layer);
    w.hash_routed = hash;
    v.group(p.substr(0, p.size() - 1));
    hc(w.hc_attn, p, "attn");
    hc(w.hc_ffn, p, "ffn");
    norm(w.attn_norm, p + "attn_norm.weight", c.hidden_size);
    norm(w.ffn_norm, p + "ffn_norm.weight", c.hidden_size);
    attention(w.attn, p + "attn.", w.compress_ratio);
    moe(w.ffn, p + "ffn.", hash);
  }

  void mtp(MtpWeights& w, int64_t index) {
    const std::string p = "mtp." + std::to_string(index) + ".";
    block(w.block, p, c.num_hidden_layers + index, /*hash=*/false);
    v.fp8(w.e_proj, p + "e_proj", c.hidden_size, c.hidden_size);
    v.fp8(w.h_proj, p + "h_proj", c.hidden_size, c.hidden_size);
    norm(w.enorm, p + "enorm.weight", c.hidden_size);
    norm(w.hnorm, p + "hnorm.weight", c.hidden_size);
    norm(w.norm, p + "norm.weight", c.hidden_size);
    hc_head(w.hc_head, p);
  }

  void model(ModelWeights& w, int64_t num_mtp) {
    v.group("embed");
    v.plain(w.embed, "embed.weight", {c.vocab_size, c.hidden_size}, {DType::BF16, DType::F32});
    v.group("head");
    v.plain(w.head, "head.weight", {c.vocab_size, c.hidden_size}, {DType::BF16, DType::F32});
    norm(w.norm, "norm.weight", c.hidden_size);
    hc_head(w.hc_head, "");
    w.layers.resize(size_t(c.num_hidden_layers));
    for (int64_t l = 0; l < c.num_hidden_layers; ++l)
      block(w.layers[size_t(l)], "layers." + std::to_string(l) + ".", l, c.is_hash_layer(l));
    w.mtp.resize(size_t(num_mtp));
    for (int64_t m = 0; m < num_mtp; ++m) mtp(w.mtp[size_t(m)], m);
  }
};

// Collects the bound views (present ones) of a walk over bound weights.
struct ViewCollector {
  std::vector<WeightView*> views;
  void group(const std::string&) {}
  void add(WeightView& w) {
    if (w.present()) views.push_back(&w);
  }
  void plain(WeightView& w, const std::string&, const std::vector<int64_t>&, const std::vector<DType>&) { add(w); }
  void fp8(WeightView& w, const std::string&, int64_t, int64_t) { add(w); }
  void expert(WeightView& w, const std::string&, int64_t, int64_t) { add(w); }
};

// Collects the table of expected tensors.
struct TableCollector {
  const ModelConfig& c;
  std::vector<TensorSpec> specs;
  std::string current_group;

  void group(const std::string& g) { current_group = g; }
  void plain(WeightView&, const std::string& name, std::vector<int64_t> shape, std::vector<DType> dtypes) {
    specs.push_back({name, std::move(shape), std::move(dtypes), current_group});
  }
  void scaled(WeightFormat f, const std::string& p, int64_t rows, int64_t cols) {
    specs.push_back({p + ".weight", code_shape(f, rows, cols), code_dtypes(f), current_group});
    specs.push_back({p + ".scale", scale_shape(f, rows, cols), {DType::F8_E8M0}, current_group});
  }
  void fp8(WeightView&, const std::string& p, int64_t rows, int64_t cols) { scaled(WeightFormat::FP8, p, rows, cols); }
  void expert(WeightView& w, const std::string& p, int64_t rows, int64_t cols) {
    scaled(c.expert_dtype == "fp8" ? WeightFormat::FP8 : WeightFormat::FP4, p, rows, cols);
  }
};

std::string dtypes_string(const std::vector<DType>& ds) {
  std::string s;
  for (size_t i = 0; i < ds.size(); ++i) s += (i ? " or " : "") + std::string(dtype_name(ds[i]));
  return s;
}

// Binds views, validating each tensor against its spec.
struct Binder {
  const TensorStore& store;
  const ModelConfig& c;

  void group(const std::string&) {}

  const TensorInfo& require(const std::string& name, const std::vector<int64_t>& shape,
                            const std::vector<DType>& dtypes) {
    const TensorInfo* t = store.find(name);
    DSV4_CHECK(t, store.root().string(), ": missing tensor '", name, "'");
    bool ok = false;
    for (DType d : dtypes) ok |= t->dtype == d;
    DSV4_CHECK(ok, *t->file, ": tensor '", name, "' has dtype ", dtype_name(t->dtype), "; expected ",
               dtypes_string(dtypes));
    DSV4_CHECK(t->shape == shape, *t->file, ": tensor '", name, "' has shape ", t->shape_string(),
               "; expected ", TensorInfo{name, t->dtype, shape}.shape_string());
    return *t;
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
    const TensorInfo& t = require(name, shape, dtypes);
    w.label = t.name;
    w.format = format_of(t.dtype);
    w.data = t.data;
    w.rows = shape.size() == 2 ? shape[0] : 1;
    w.cols = shape.back();
  }
  void scaled(WeightView& w, WeightFormat f, const std::string& p, int64_t rows, int64_t cols) {
    const TensorInfo& codes = require(p + ".weight", code_shape(f, rows, cols), code_dtypes(f));
    const TensorInfo& scales = require(p + ".scale", scale_shape(f, rows, cols), {DType::F8_E8M0});
    w = WeightView{f, rows, cols, codes.data, scales.data, weight_scale_cols(f, cols), codes.name};
  }
  void fp8(WeightView& w, const std::string& p, int64_t rows, int64_t cols) { scaled(w, WeightFormat::FP8, p, rows, cols); }
  void expert(WeightView& w, const std::string& p, int64_t rows, int64_t cols) {
    scaled(w, c.expert_dtype == "fp8" ? WeightFormat::FP8 : WeightFormat::FP4, p, rows, cols);
  }
};

}  // namespace

bool has_mtp_module(const TensorStore& store, const ModelConfig& config, int64_t index) {
  return index < config.num_nextn_predict_layers &&
         store.find("mtp." + std::to_string(index) + ".enorm.weight") != nullptr;
}

std::vector<TensorSpec> expected_tensors(const ModelConfig& config, bool with_mtp) {
  TableCollector collector{config, {}, {}};
  ModelWeights scratch;
  Walk<TableCollector>{collector, config}.model(scratch, with_mtp ? config.num_nextn_predict_layers : 0);
  return std::move(collector.specs);
}

std::vector<WeightView*> weight_views(ModelWeights& weights, const ModelConfig& config) {
  ViewCollector collector;
  Walk<ViewCollector>{collector, config}.model(weights, int64_t(weights.mtp.size()));
  return std::move(collector.views);
}

ModelWeights bind_weights(const TensorStore& store, const ModelConfig& config) {
  int64_t num_mtp = 0;
  while (num_mtp < config.num_nextn_predict_layers && has_mtp_module(store, config, num_mtp)) ++num_mtp;
  Binder binder{store, config};
  ModelWeights w;
  Walk<Binder>{binder, config}.model(w, num_mtp);
  return w;
}

}  // namespace dsv4

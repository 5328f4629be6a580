// The walk over the model's tensor table, shared by the files that visit it: weights.cc (the
// table, the bound views) and weight_binding.cc (binding a checkpoint). Internal to src/model.
#pragma once
#include <string>
#include <vector>

#include "backend/weight_view.h"
#include "core/dtype.h"
#include "io/config.h"
#include "model/weights.h"

namespace dsv4::weight_walk {

// The shapes of a block-scaled weight's two tensors (prefix.weight codes, prefix.scale E8M0),
// from the format's traits (FP8: codes [rows, cols]; FP4: two codes per byte [rows, cols/2]).
inline std::vector<int64_t> code_shape(WeightFormat f, int64_t rows, int64_t cols) {
  return {rows, cols * weight_format_traits(f).bits / 8};
}
inline std::vector<int64_t> scale_shape(WeightFormat f, int64_t rows, int64_t cols) {
  return {weight_scale_rows(f, rows), weight_scale_cols(f, cols)};
}
inline const std::vector<DType>& code_dtypes(WeightFormat f) {
  static const std::vector<DType> kFp8{DType::F8_E4M3}, kFp4{DType::I8, DType::U8};
  return f == WeightFormat::FP8 ? kFp8 : kFp4;
}

inline std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

inline std::string dtypes_string(const std::vector<DType>& ds) {
  std::string s;
  for (size_t i = 0; i < ds.size(); ++i) s += (i ? " or " : "") + std::string(dtype_name(ds[i]));
  return s;
}

// The walk over every tensor of the checkpoint. It only adds what is missing (optional parts,
// vector sizes), so walking bound weights again keeps them (weight_views). `Visitor` provides
//   plain(view, name, shape, dtypes)          a tensor used as stored (F32/BF16/I64 ...); dtypes[0] is
//                                             the release's. Where that is F32 (hc, ape, sink, gate
//                                             bias) a BF16 tensor is accepted too, widened to F32 at
//                                             load (kilobytes; the ops read these as floats)
//   fp8(view, prefix, rows, cols)             a matrix the release stores as FP8 (128x128 tiles)
//   dense(view, prefix, rows, cols)           a matrix the release stores in BF16 (prefix.weight) and
//                                             quantized layouts may store in any matrix encoding
//                                             (the compressors' and the indexer's projections)
//   expert(view, prefix, rows, cols)          a routed expert's matrix: FP4 in the release (FP8 when
//                                             expert_dtype=fp8)
// Those are the release's encodings (the table make-checkpoint writes); the Binder reads each
// matrix's actual encoding from its tensors.
template <typename Visitor>
struct Walk {
  Visitor& v;
  const ModelConfig& c;

  void hc(HcWeights& w, const std::string& p, const char* site) {
    const int64_t mix = (2 + c.hc_mult) * c.hc_mult;
    v.plain(w.fn, p + "hc_" + site + "_fn", {mix, c.hc_mult * c.hidden_size}, {DType::F32, DType::BF16});
    v.plain(w.base, p + "hc_" + site + "_base", {mix}, {DType::F32, DType::BF16});
    v.plain(w.scale, p + "hc_" + site + "_scale", {3}, {DType::F32, DType::BF16});
  }

  void hc_head(HcHeadWeights& w, const std::string& p) {
    v.plain(w.fn, p + "hc_head_fn", {c.hc_mult, c.hc_mult * c.hidden_size}, {DType::F32, DType::BF16});
    v.plain(w.base, p + "hc_head_base", {c.hc_mult}, {DType::F32, DType::BF16});
    v.plain(w.scale, p + "hc_head_scale", {1}, {DType::F32, DType::BF16});
  }

  void norm(WeightView& w, const std::string& name, int64_t n) {
    v.plain(w, name, {n}, {DType::BF16, DType::F32});
  }

  void compressor(CompressorWeights& w, const std::string& p, int64_t ratio, int64_t width) {
    w.ratio = ratio;
    w.head_dim = width;
    w.overlap = ratio == 4;
    const int64_t proj = (w.overlap ? 2 : 1) * width;
    v.plain(w.ape, p + "ape", {ratio, proj}, {DType::F32, DType::BF16});
    v.dense(w.wkv, p + "wkv", proj, c.hidden_size);
    v.dense(w.wgate, p + "wgate", proj, c.hidden_size);
    norm(w.norm, p + "norm.weight", width);
  }

  void attention(AttentionWeights& w, const std::string& p, int64_t ratio) {
    const int64_t D = c.hidden_size, H = c.num_attention_heads, d = c.head_dim;
    v.plain(w.attn_sink, p + "attn_sink", {H}, {DType::F32, DType::BF16});
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
      v.dense(w.indexer->weights_proj, ip + "weights_proj", c.index_n_heads, D);
      compressor(w.indexer->compressor, ip + "compressor.", ratio, c.index_head_dim);
    }
  }

  void moe(MoeWeights& w, const std::string& p, bool hash) {
    const int64_t D = c.hidden_size, E = c.n_routed_experts, inter = c.moe_intermediate_size;
    v.plain(w.gate, p + "gate.weight", {E, D}, {DType::BF16, DType::F32});
    if (hash)
      v.plain(w.tid2eid, p + "gate.tid2eid", {c.vocab_size, c.num_experts_per_tok}, {DType::I64, DType::I32});
    else
      v.plain(w.bias, p + "gate.bias", {E}, {DType::F32, DType::BF16});
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

  // DSpark stages (dspark.md): V4 blocks (score-routed, window-only) under mtp.N., the context
  // projection on stage 0, the head side on the last stage.
  void dspark(DSparkWeights& w, int64_t stages) {
    const int64_t D = c.hidden_size, r = c.dspark_markov_rank;
    const int64_t taps = int64_t(c.dspark_target_layer_ids.size());
    w.stages.resize(size_t(stages));
    for (int64_t s = 0; s < stages; ++s) {
      const std::string p = "mtp." + std::to_string(s) + ".";
      block(w.stages[size_t(s)], p, c.num_hidden_layers + s, /*hash=*/false);
      if (s == 0) {
        v.fp8(w.main_proj, p + "main_proj", D, taps * D);
        norm(w.main_norm, p + "main_norm.weight", D);
      }
      if (s + 1 == stages) {
        norm(w.norm, p + "norm.weight", D);
        hc_head(w.hc_head, p);
        v.plain(w.markov_w1, p + "markov_head.markov_w1.weight", {c.vocab_size, r}, {DType::BF16, DType::F32});
        v.plain(w.markov_w2, p + "markov_head.markov_w2.weight", {c.vocab_size, r}, {DType::BF16, DType::F32});
        v.plain(w.confidence, p + "confidence_head.proj.weight", {1, D + r}, {DType::BF16, DType::F32});
      }
    }
  }

  // num_mtp: MTP modules, or DSpark stages where the config has a DSpark drafter.
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
    if (c.has_dspark()) {
      if (num_mtp > 0) {
        if (!w.dspark) w.dspark.emplace();
        dspark(*w.dspark, num_mtp);
      }
      return;
    }
    w.mtp.resize(size_t(num_mtp));
    for (int64_t m = 0; m < num_mtp; ++m) mtp(w.mtp[size_t(m)], m);
  }
};

}  // namespace dsv4::weight_walk

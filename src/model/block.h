// One DeepSeek-V4 block (spec §3 "Block"): attention and MoE, each between an hc_pre
// and an hc_post of the hyper-connection streams.
#pragma once
#include <span>
#include <string>

#include "model/attention.h"
#include "model/hyper_connection.h"
#include "model/moe.h"

namespace dsv4 {

class Block {
 public:
  // scope: the golden name prefix ("L3", "mtp"); cache_layer: index into each sequence's layer caches;
  // draft_block: a DSpark stage's (its attention sees the whole draft block, see Attention).
  Block(const BlockWeights& w, const ModelConfig& c, std::string scope, size_t cache_layer, int64_t draft_block = 0);

  // x: [N, hc, D] streams → streams after the block.
  Tensor forward(Pass& p, const Tensor& x) const;
  // Every row extends the caches; only rows `outputs` (ascending) go on through the attention
  // output and the MoE: the result is their streams, [outputs, hc, D]. For rows whose outputs
  // nothing reads (the MTP's rows behind its last, a prompt's rows before the last).
  Tensor forward(Pass& p, const Tensor& x, std::span<const int64_t> outputs) const;

  const Attention& attention() const { return attention_; }
  const Moe& moe() const { return moe_; }
  const HyperConnection& hc_attn() const { return hc_attn_; }
  const HyperConnection& hc_ffn() const { return hc_ffn_; }
  const BlockWeights& weights() const { return w_; }
  const std::string& scope() const { return scope_; }
  size_t cache_layer() const { return cache_layer_; }

 private:
  struct AttnInput {
    Backend::HcPreOut mix;  // hc_attn's pre-mix of the streams
    Tensor h;               // attn_norm(mix.u): the attention's input
  };
  // hc_attn pre, the attention norm and the attention's cache extension, for every row of p.
  AttnInput extend_caches(Pass& p, const Tensor& x) const;
  // After the caches: attention output, hc_attn post, then the MoE between the hc_ffn pair, for p's rows.
  Tensor output(Pass& p, const Tensor& x, Tensor& h, Backend::HcPreOut& mix) const;

  const BlockWeights& w_;
  float eps_;
  std::string scope_;
  size_t cache_layer_;
  HyperConnection hc_attn_, hc_ffn_;
  Attention attention_;
  Moe moe_;
};

}  // namespace dsv4

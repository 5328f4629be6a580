#include "checkpoint/encoding_summary.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace dsv4 {

namespace {

// Adds views to one group; `share` is the fraction of them a token reads.
struct GroupBuilder {
  ModuleEncoding m;
  void add(const WeightView& w, double share = 1.0) {
    if (!w.present()) return;
    const uint64_t b = w.bytes();
    m.format_bytes[weight_format_name(w.format)] += b;
    m.bytes += b;
    m.bytes_per_token += double(b) * share;
  }
  void add_row(const WeightView& w) {  // a table of which a token reads one row (embed, tid2eid)
    if (!w.present()) return;
    const uint64_t b = w.bytes();
    m.format_bytes[weight_format_name(w.format)] += b;
    m.bytes += b;
    m.bytes_per_token += double(b) / double(std::max<int64_t>(w.rows, 1));
  }
};

void add_compressor(GroupBuilder& g, const CompressorWeights& c) {
  for (const WeightView* w : {&c.ape, &c.wkv, &c.wgate, &c.norm}) g.add(*w);
}

// The attention's weights; its compressors and indexer into `compressors` when given (the target
// reports them apart: quantized layouts encode them on their own).
void add_attention(GroupBuilder& g, const BlockWeights& b, GroupBuilder* compressors = nullptr) {
  const AttentionWeights& a = b.attn;
  for (const WeightView* w : {&a.attn_sink, &a.wq_a, &a.q_norm, &a.wq_b, &a.wkv, &a.kv_norm, &a.wo_a, &a.wo_b,
                              &b.attn_norm, &b.hc_attn.fn, &b.hc_attn.base, &b.hc_attn.scale})
    g.add(*w);
  GroupBuilder& c = compressors ? *compressors : g;
  if (a.compressor) add_compressor(c, *a.compressor);
  if (a.indexer) {
    c.add(a.indexer->wq_b);
    c.add(a.indexer->weights_proj);
    add_compressor(c, a.indexer->compressor);
  }
}

void add_router(GroupBuilder& g, const BlockWeights& b) {
  for (const WeightView* w : {&b.ffn.gate, &b.ffn.bias, &b.ffn_norm, &b.hc_ffn.fn, &b.hc_ffn.base, &b.hc_ffn.scale})
    g.add(*w);
  g.add_row(b.ffn.tid2eid);
}

void add_shared(GroupBuilder& g, const MoeWeights& m) {
  for (const WeightView* w : {&m.shared.w1, &m.shared.w2, &m.shared.w3}) g.add(*w);
}

void add_routed(GroupBuilder& g, const MoeWeights& m, const ModelConfig& c) {
  const double share = m.experts.empty() ? 0.0 : double(c.num_experts_per_tok) / double(m.experts.size());
  for (const ExpertWeights& e : m.experts)
    for (const WeightView* w : {&e.w1, &e.w2, &e.w3}) g.add(*w, share);
}

// One DSpark draft step (dspark.md) for one sequence: the context rows of the tokens verified
// since the last step through main_proj (read once, for all of them) and every stage's wkv; the
// B-row block through every stage, whose rows together select at most min(B·k, E) of a stage's E
// routed experts; the target's LM head once for the B rows (with the last stage's norm and
// hc_head); the Markov head's W2 once per block row (row k's bias needs draft k-1: B sequential
// [V, r] products) and one W1 row per block row; the confidence head.
ModuleEncoding dspark_draft_step(const DSparkWeights& d, const ModelWeights& w, const ModelConfig& c) {
  const int64_t B = c.dspark_block_size, E = c.n_routed_experts;
  const int64_t experts = std::min(B * c.num_experts_per_tok, E);
  GroupBuilder g;
  g.m = {"DSpark", {}, 0, 0,
         cat("one draft step of ", B, " rows: ", d.stages.size(), " stages' attention, router, shared expert and up to ",
             experts, " of ", E, " routed experts each; main_proj once for the verified rows; the target's head once "
             "for the ", B, " rows; the Markov W2 once per row; the confidence head"),
         "draft step"};
  for (const BlockWeights& b : d.stages) {
    add_attention(g, b);
    add_router(g, b);
    add_shared(g, b.ffn);
    const double share = b.ffn.experts.empty() ? 0.0 : double(experts) / double(b.ffn.experts.size());
    for (const ExpertWeights& e : b.ffn.experts)
      for (const WeightView* v : {&e.w1, &e.w2, &e.w3}) g.add(*v, share);
  }
  for (const WeightView* v : {&d.main_proj, &d.main_norm, &d.norm, &d.hc_head.fn, &d.hc_head.base, &d.hc_head.scale,
                              &d.confidence, &w.head})
    g.add(*v);
  g.add(d.markov_w2, double(B));
  if (d.markov_w1.present()) {  // B rows of W1 (counted in the group's bytes once)
    g.add(d.markov_w1, 0.0);
    g.m.bytes_per_token += double(d.markov_w1.bytes()) * double(B) / double(std::max<int64_t>(d.markov_w1.rows, 1));
  }
  return std::move(g.m);
}

}  // namespace

std::string ModuleEncoding::encoding() const {
  std::vector<std::pair<uint64_t, std::string>> by_bytes;
  for (const auto& [name, b] : format_bytes) by_bytes.push_back({b, name});
  std::sort(by_bytes.begin(), by_bytes.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string s;
  for (const auto& [b, name] : by_bytes) {
    const double pct = bytes ? 100.0 * double(b) / double(bytes) : 0.0;
    const std::string share = pct > 0.0 && pct < 1.0 ? "<1" : std::to_string(std::lround(pct));
    s += cat(s.empty() ? "" : ", ", name, " ", share, "%");
  }
  return s.empty() ? "-" : s;
}

std::vector<ModuleEncoding> summarize_encodings(const ModelWeights& w, const ModelConfig& c) {
  GroupBuilder embed, attention, compressors, router, shared, routed, head, mtp;
  embed.m = {"embed", {}, 0, 0, "one row"};
  attention.m = {"target attention", {}, 0, 0, "all layers' attention, its norm and hyper-connection"};
  compressors.m = {"compressors and indexers", {}, 0, 0,
                   "the compressed layers' KV compressors and sparse-attention indexers (wkv, wgate, wq_b, weights_proj)"};
  router.m = {"router and FFN norms", {}, 0, 0, "gate, bias (or one tid2eid row), FFN norm and hyper-connection"};
  shared.m = {"shared experts", {}, 0, 0, "every layer's shared expert"};
  routed.m = {"routed experts", {}, 0, 0, cat(c.num_experts_per_tok, " of each layer's ", c.n_routed_experts,
                                                " experts (their mean size)")};
  head.m = {"head", {}, 0, 0, "final norm, hyper-connection head, vocabulary projection"};
  mtp.m = {"MTP", {}, 0, 0, "one draft step's own weights (the head it shares with the target not included)"};
  embed.add_row(w.embed);
  for (const BlockWeights& b : w.layers) {
    add_attention(attention, b, &compressors);
    add_router(router, b);
    add_shared(shared, b.ffn);
    add_routed(routed, b.ffn, c);
  }
  for (const WeightView* v : {&w.norm, &w.head, &w.hc_head.fn, &w.hc_head.base, &w.hc_head.scale}) head.add(*v);
  for (const MtpWeights& m : w.mtp) {
    add_attention(mtp, m.block);
    add_router(mtp, m.block);
    add_shared(mtp, m.block.ffn);
    add_routed(mtp, m.block.ffn, c);
    for (const WeightView* v : {&m.e_proj, &m.h_proj, &m.enorm, &m.hnorm, &m.norm, &m.hc_head.fn, &m.hc_head.base,
                                &m.hc_head.scale})
      mtp.add(*v);
  }
  std::vector<ModuleEncoding> out;
  for (GroupBuilder* g : {&embed, &attention, &compressors, &router, &shared, &routed, &head})
    if (g != &compressors || g->m.bytes > 0) out.push_back(std::move(g->m));
  if (!w.mtp.empty()) out.push_back(std::move(mtp.m));
  if (w.dspark) out.push_back(dspark_draft_step(*w.dspark, w, c));
  return out;
}

double target_decode_bytes_per_token(const std::vector<ModuleEncoding>& modules) {
  double total = 0;
  for (const ModuleEncoding& m : modules)
    if (m.module != "MTP" && m.module != "DSpark") total += m.bytes_per_token;
  return total;
}

}  // namespace dsv4

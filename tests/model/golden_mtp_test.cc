// Golden component tests of the MTP module (spec §4): the combiner (enorm / hnorm / e_proj /
// h_proj), the MTP block's internals (hc_pre / hc_post at both sites, the norms, the attention
// projections, window attention over a cache filled from golden data, the output projection,
// the MoE) and the MTP's own hc_head / norm / logits — each run alone on the reference's own
// inputs (tests/data/tiny-a/golden_ops.safetensors, `mtp.prefill.*` / `mtp.decode.*`) and
// compared with the reference's outputs within the per-tensor tolerances of golden_ops.json.
//
// The two calls: mtp.prefill = positions 0..P-2 fed target.hidden[t] and tokens[t+1];
// mtp.decode = position P-1 fed target.hidden[P-1] and tokens[P] (after that prefill).
// End to end (mtp.logits) and the trace of a real MtpModule::forward: golden_mtp_logits_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "support/golden_support.h"

namespace dsv4 {
namespace {

using test::golden;
using test::GoldenPass;
using test::GoldenPhase;
using test::iota;

class GoldenMtp : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { golden().mtp(); }  // opens the checkpoint and the golden files once

  GoldenPhase phase() const { return test::mtp_phase(GetParam()); }
  std::string prefix() const { return "mtp." + phase().name + "."; }  // "mtp.prefill."
  MtpModule& mtp() const { return golden().mtp(); }
  const Block& block() const { return mtp().block(); }
  const MtpWeights& weights() const { return mtp().weights(); }
  const ModelConfig& config() const { return golden().config(); }
  float eps() const { return float(config().rms_norm_eps); }
  // A pass over the phase's positions with the MTP's own (empty) cache; the row at position t
  // carries tokens[t+1], the MTP's input token.
  std::unique_ptr<GoldenPass> make_pass() const {
    return std::make_unique<GoldenPass>(phase(), mtp().new_sequence(), 1);
  }
};

std::string phase_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

// ---- the module's parameters: its own block, hc_head and norm, not the target's

TEST_P(GoldenMtp, BindsItsOwnParameters) {
  const MtpWeights& w = weights();
  EXPECT_EQ(w.e_proj.name(), "mtp.0.e_proj.weight");
  EXPECT_EQ(w.h_proj.name(), "mtp.0.h_proj.weight");
  EXPECT_EQ(w.enorm.name(), "mtp.0.enorm.weight");
  EXPECT_EQ(w.hnorm.name(), "mtp.0.hnorm.weight");
  EXPECT_EQ(w.norm.name(), "mtp.0.norm.weight");
  EXPECT_EQ(w.hc_head.fn.name(), "mtp.0.hc_head_fn");
  EXPECT_EQ(w.hc_head.base.name(), "mtp.0.hc_head_base");
  EXPECT_EQ(w.hc_head.scale.name(), "mtp.0.hc_head_scale");
  EXPECT_EQ(block().scope(), "mtp");
  EXPECT_EQ(block().weights().compress_ratio, 0) << "the MTP block is window-only";
  EXPECT_FALSE(block().weights().hash_routed) << "the MTP block is never hash-routed";
  EXPECT_FALSE(block().attention().compressor().has_value());
  EXPECT_FALSE(block().attention().indexer().has_value());
  const RopeSpec& rope = block().attention().rope();
  EXPECT_EQ(rope.theta, config().rope_theta) << "the MTP block's RoPE uses rope_theta";
  EXPECT_FALSE(rope.yarn) << "the MTP block's RoPE has no YaRN";
}

// ---- the combiner: e = enorm(embed(token)), h = hnorm(streams), x_in = e_proj(e) + h_proj(h)

TEST_P(GoldenMtp, CombinerNormsAndProjections) {
  const GoldenPhase ph = phase();
  auto gp = make_pass();
  Pass& p = gp->pass();
  const int64_t n = ph.rows, hc = config().hc_mult, D = config().hidden_size;
  ASSERT_EQ(p.tokens.front(), golden().tokens().at(size_t(ph.first + 1))) << "the MTP's input token at t is t+1";

  // MtpModule::combine on the golden target streams: e and h as it traces them, and its x_in
  // (chained from its own e and h).
  Tensor streams = gp->load(test::output_rows("target.hidden", ph.first, ph.first + n), {n, hc, D});
  Tensor x = mtp().combine(p, streams);
  EXPECT_TRUE(test::check_tensor(prefix() + "e", gp->traced(prefix() + "e"), "",
                                 "MtpModule::combine: enorm(embed(golden tokens[t+1]))"));
  EXPECT_TRUE(test::check_tensor(prefix() + "h", gp->traced(prefix() + "h"), "",
                                 "MtpModule::combine: hnorm(golden target.hidden[t])"));
  EXPECT_TRUE(test::check_tensor(prefix() + "x_in", gp->host(x), "", "MtpModule::combine, chained e and h"));

  // The projections and the broadcast sum on the golden e and h, through the backend ops
  // MtpModule::combine uses.
  Backend& be = gp->be();
  Tensor ep = gp->alloc({n, D});
  be.linear(gp->load(prefix() + "e"), weights().e_proj, ep);
  Tensor hp = gp->alloc({n, hc, D});
  be.linear(gp->load(prefix() + "h"), weights().h_proj, hp);
  Tensor sum = gp->alloc({n, hc, D});
  be.add(hp, ep, sum);
  EXPECT_TRUE(test::check_tensor(prefix() + "x_in", gp->host(sum), "", "e_proj(golden e) + h_proj(golden h)"));
}

// ---- hyper-connections at both sites of the MTP block

TEST_P(GoldenMtp, HyperConnectionPreAndPost) {
  auto gp = make_pass();
  Pass& p = gp->pass();
  const struct {
    const char* site;
    const HyperConnection* hc;
    const char* x;  // streams entering the site (the block's input is x_in)
    const char* f;  // the sub-layer's output
    const char* y;  // streams after hc_post
  } sites[] = {{"hc_attn", &block().hc_attn(), "x_in", "attn_out", "hc_attn_out"},
               {"hc_ffn", &block().hc_ffn(), "hc_attn_out", "moe_out", "out"}};
  for (const auto& s : sites) {
    Tensor x = gp->load(prefix() + s.x);
    const Backend::HcPreOut out = s.hc->pre(p, x, "mtp");
    const std::string site = prefix() + s.site + ".";
    const std::string note = std::string("from golden ") + s.x;
    EXPECT_TRUE(test::check_tensor(site + "mixes", gp->host(out.mixes), "", note));
    EXPECT_TRUE(test::check_tensor(site + "pre", gp->host(out.pre), "", note));
    EXPECT_TRUE(test::check_tensor(site + "post", gp->host(out.post), "", note));
    EXPECT_TRUE(test::check_tensor(site + "comb", gp->host(out.comb), "", note));
    EXPECT_TRUE(test::check_tensor(site + "u", gp->host(out.u), "", note));

    Backend::HcPreOut mix;
    mix.post = gp->load(site + "post");
    mix.comb = gp->load(site + "comb");
    Tensor y = s.hc->post(p, x, gp->load(prefix() + s.f), mix);
    EXPECT_TRUE(test::check_tensor(prefix() + s.y, gp->host(y), "",
                                   std::string("from golden ") + s.x + ", " + s.f + ", " + s.site + ".post/comb"));
  }
}

// ---- the norms in front of attention and MoE

TEST_P(GoldenMtp, AttentionAndFfnNorms) {
  auto gp = make_pass();
  const struct {
    const char* u;
    const WeightView* w;
    const char* y;
  } norms[] = {{"hc_attn.u", &block().weights().attn_norm, "attn_in"},
               {"hc_ffn.u", &block().weights().ffn_norm, "ffn_in"}};
  for (const auto& s : norms) {
    Tensor u = gp->load(prefix() + s.u);
    Tensor y = gp->alloc({u.dim(0), u.dim(1)});
    gp->be().rms_norm(u, *s.w, eps(), y);
    EXPECT_TRUE(test::check_tensor(prefix() + s.y, gp->host(y), "", std::string("from golden ") + s.u));
  }
}

// ---- attention: projections, window attention over a golden-filled cache, output

TEST_P(GoldenMtp, QueryAndKeyValueProjections) {
  auto gp = make_pass();
  Pass& p = gp->pass();
  const Attention& a = block().attention();
  Tensor x = gp->load(prefix() + "attn_in");

  Tensor qr = a.low_rank_query(p, x);
  EXPECT_TRUE(test::check_tensor(prefix() + "qr", gp->host(qr), "", "from golden attn_in"));
  Tensor q = a.query(p, gp->load(prefix() + "qr"));
  EXPECT_TRUE(test::check_tensor(prefix() + "q", gp->host(q), "", "from golden qr"));
  Tensor normed;
  Tensor kv = a.key_value(p, x, &normed);
  EXPECT_TRUE(test::check_tensor(prefix() + "kv_normed", gp->host(normed), "", "from golden attn_in"));
  EXPECT_TRUE(test::check_tensor(prefix() + "kv", gp->host(kv), "", "from golden attn_in"));
}

TEST_P(GoldenMtp, WindowAttentionAndOutputProjection) {
  const GoldenPhase ph = phase();
  auto gp = make_pass();
  Pass& p = gp->pass();
  const Attention& a = block().attention();
  LayerCache& cache = gp->cache(block().cache_layer());
  const int64_t d = config().head_dim, window = config().sliding_window;

  // The cache the reference attended to, and the golden index lists checked against the rows
  // the engine's window covers (the last `window` positions up to and including the row's).
  std::vector<float> rows;
  std::vector<int64_t> positions, expected_idxs;
  if (!ph.decode()) {
    rows = golden().f32(prefix() + "kv");
    positions = iota(0, ph.rows);
    for (int64_t t = 0; t < ph.rows; ++t)  // index into the call's kv rows
      for (int64_t j = 0; j < window; ++j) expected_idxs.push_back(t - window + 1 + j >= 0 ? t - window + 1 + j : -1);
  } else {
    // attn_kv: the reference's ring, row = position mod window.
    const std::vector<float> buffer = golden().f32(prefix() + "attn_kv");
    ASSERT_EQ(int64_t(buffer.size()), window * d) << prefix() << "attn_kv is not one window of rows";
    for (int64_t t = std::max<int64_t>(0, ph.first - window + 1); t <= ph.first; ++t) {
      rows.insert(rows.end(), buffer.begin() + (t % window) * d, buffer.begin() + (t % window + 1) * d);
      positions.push_back(t);
      expected_idxs.push_back(t % window);
    }
    expected_idxs.resize(size_t(window), -1);
  }
  const std::string idx_name = prefix() + "topk_idxs";
  const int64_t idx_cols = golden().info(idx_name).shape.at(1);
  ASSERT_EQ(idx_cols, window) << idx_name << ": a window-only block lists `window` rows";
  EXPECT_TRUE(test::check_rows_differ(idx_name, test::index_rows_differ(expected_idxs, golden().i64(idx_name), idx_cols),
                                      ph.rows, test::tolerance(idx_name).rows_differ,
                                      "the engine's window: the last sliding_window positions"));

  Tensor kv = gp->load(rows, {int64_t(positions.size()), d});
  store_table_rows(gp->be(), cache.kv, positions, kv);
  Tensor o = a.attend(p, gp->load(prefix() + "q"), nullptr, block().cache_layer());
  EXPECT_TRUE(test::check_tensor(prefix() + "attn_o", gp->host(o), "",
                                 ph.decode() ? "from golden q, cache from golden attn_kv" : "from golden q and kv"));

  Tensor golden_o = gp->load(prefix() + "attn_o");
  Tensor out = a.project_out(p, golden_o);
  EXPECT_TRUE(test::check_tensor(prefix() + "attn_out", gp->host(out), "", "from golden attn_o"));
}

// ---- MoE: routing, routed experts, shared expert, their sum

TEST_P(GoldenMtp, MoeRoutingExpertsAndSum) {
  auto gp = make_pass();
  Pass& p = gp->pass();
  const Moe& moe = block().moe();
  Tensor x = gp->load(prefix() + "ffn_in");
  const int64_t k = config().num_experts_per_tok;

  Tensor w, idx;
  moe.route(p, x, w, idx);
  const std::vector<int64_t> gi = golden().i64(prefix() + "gate.indices");
  const test::GateComparison gate =
      test::compare_gate(gp->host(w), gp->host_i64(idx), golden().f32(prefix() + "gate.weights"), gi, k);
  EXPECT_TRUE(test::check_rows_differ(prefix() + "gate.indices", gate.rows_differ, int64_t(gi.size()) / k,
                                      test::tolerance(prefix() + "gate.indices").rows_differ, "from golden ffn_in"));
  EXPECT_TRUE(test::check_errors(prefix() + "gate.weights", gate.errors, test::tolerance(prefix() + "gate.weights"),
                                 "per expert, rows with the golden expert set"));

  Tensor golden_w = gp->load(prefix() + "gate.weights");
  Tensor golden_idx = gp->load_i32(gi, golden().info(prefix() + "gate.indices").shape);
  Tensor routed = moe.routed(p, x, golden_w, golden_idx);
  EXPECT_TRUE(test::check_tensor(prefix() + "moe_routed", gp->host(routed), "", "from golden ffn_in and gate"));
  Tensor shared = moe.shared(p, x);
  EXPECT_TRUE(test::check_tensor(prefix() + "moe_shared", gp->host(shared), "", "from golden ffn_in"));
  Tensor sum = gp->alloc({x.dim(0), x.dim(1)});
  gp->be().add(gp->load(prefix() + "moe_routed"), gp->load(prefix() + "moe_shared"), sum);
  EXPECT_TRUE(test::check_tensor(prefix() + "moe_out", gp->host(sum), "", "golden routed + golden shared"));
}

// ---- the MTP's own hc_head and norm, the shared head: logits vs mtp.logits_stepwise

TEST_P(GoldenMtp, HcHeadNormAndLogits) {
  const GoldenPhase ph = phase();
  auto gp = make_pass();
  Backend& be = gp->be();
  const MtpWeights& w = weights();
  const int64_t n = ph.rows, D = config().hidden_size, V = config().vocab_size;
  const float hc_eps = float(config().hc_eps);

  Tensor y = gp->alloc({n, D});
  be.hc_head(gp->load(prefix() + "out"), w.hc_head, hc_eps, eps(), y);
  EXPECT_TRUE(test::check_tensor(prefix() + "hc_head_y", gp->host(y), "", "from golden out, mtp.0.hc_head_*"));

  // The same with the target's hc_head parameters (a typical mistake) must stand out: this
  // guards the check above against golden data that could not tell the two apart.
  if (!ph.decode()) {
    Tensor wrong = gp->alloc({n, D});
    be.hc_head(gp->load(prefix() + "out"), golden().weights().hc_head, hc_eps, eps(), wrong);
    const test::ErrorSummary e =
        test::summarize(test::row_rel_l2(gp->host(wrong), golden().f32(prefix() + "hc_head_y"), D));
    std::printf("[golden] %-60s median %.3e  max %.3e (must exceed the tolerance)\n",
                (prefix() + "hc_head_y (the target's hc_head instead: the mistake)").c_str(), e.median, e.max);
    EXPECT_EQ(e.nonfinite, 0u) << "the contrast run itself must be finite";
    EXPECT_GT(e.max, test::tolerance(prefix() + "hc_head_y").rel_max)
        << prefix() << "hc_head_y: the target's hc_head gives max " << e.max << ", within the tolerance";
  }

  Tensor normed = gp->alloc({n, D});
  be.rms_norm(gp->load(prefix() + "hc_head_y"), w.norm, eps(), normed);
  EXPECT_TRUE(test::check_tensor(prefix() + "normed", gp->host(normed), "", "from golden hc_head_y, mtp.0.norm"));

  // Logits against the reference's fp32 logits of the same call (relative L2 per row <= 0.01,
  // as the target's head test): mtp.prefill -> mtp.logits_stepwise[0..P-2] (the stepwise run's
  // first call is this call), mtp.decode -> mtp.logits_stepwise[P-1].
  const test::Tolerance logits_tol{false, 0.01, 0.01, 0};
  const std::vector<float> g = test::output_rows("mtp.logits_stepwise", ph.first, ph.first + n);
  const std::string label = "mtp.logits_stepwise[" + std::to_string(ph.first) +
                            (n > 1 ? ".." + std::to_string(ph.first + n - 1) : "") + "]";
  Tensor logits = gp->alloc({n, V});
  be.linear(gp->load(prefix() + "normed"), golden().weights().head, logits, {ActQuant::None, false});
  EXPECT_TRUE(test::check_errors(label, test::row_rel_l2(gp->host(logits), g, V), logits_tol,
                                 "head of golden " + prefix() + "normed"));

  // The whole head as MtpModule::forward runs it (Transformer::head with the MTP's hc_head
  // and norm) on the golden block output.
  Tensor chained = gp->alloc({n, V});
  golden().model().head(gp->pass(), gp->load(prefix() + "out"), w.hc_head, w.norm, golden().weights().head, chained,
                        "mtp");
  EXPECT_TRUE(test::check_errors(label, test::row_rel_l2(gp->host(chained), g, V), logits_tol,
                                 "Transformer::head of golden " + prefix() + "out, MTP hc_head / norm"));
}

INSTANTIATE_TEST_SUITE_P(BothPhases, GoldenMtp, ::testing::Values(std::string("prefill"), std::string("decode")),
                         phase_name);

// ---- the MTP block's RoPE table (rope_theta, no YaRN)

TEST(GoldenMtpRope, FrequencyTableMatchesTheReference) {
  const std::string name = "freqs.mtp";
  const std::vector<int64_t> shape = golden().info(name).shape;  // [T, r/2, 2]
  const RopeSpec& spec = golden().mtp().block().attention().rope();
  ASSERT_EQ(spec.rope_dims, 2 * shape.at(1)) << name;
  EXPECT_TRUE(test::check_tensor(name, test::rope_table(spec, shape.at(0)), "",
                                 "backend rope of unit pairs, refined by the inverse rotation"));
}

}  // namespace
}  // namespace dsv4

// Golden component tests of the rest of a DeepSeek-V4 block and of the model's ends:
// hyper-connections (hc_pre at both sites, hc_post), the two norms, the MoE (routing,
// routed and shared experts, their sum), the final hc_head / norm / head and the RoPE
// tables. The SwiGLU clamp is in golden_swiglu_clamp_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "support/golden_support.h"

namespace dsv4 {
namespace {

using test::golden;
using test::GoldenPass;
using test::GoldenPhase;
using test::layer_phase_name;
using test::LayerPhase;


GoldenPhase phase_named(const std::string& name) {
  return name == "decode" ? test::decode_phase() : test::prefill_phase();
}

class GoldenBlockOps : public ::testing::TestWithParam<LayerPhase> {
 protected:
  static void SetUpTestSuite() { golden(); }

  int64_t layer() const { return std::get<0>(GetParam()); }
  GoldenPhase phase() const { return phase_named(std::get<1>(GetParam())); }
  std::string prefix() const { return test::layer_scope(layer()) + "." + phase().name + "."; }
  const Block& block() const { return golden().model().blocks().at(size_t(layer())); }
  float eps() const { return float(golden().config().rms_norm_eps); }
};

// ---- hyper-connections

TEST_P(GoldenBlockOps, HyperConnectionPreAndPost) {
  GoldenPass gp(phase());  // tracing: HyperConnection::pre also returns mixes and pre
  Pass& p = gp.pass();
  const struct {
    const char* site;
    const HyperConnection* hc;
    const char* x;  // streams entering the site
    const char* f;  // the sub-layer's output
    const char* y;  // streams after hc_post
  } sites[] = {{"hc_attn", &block().hc_attn(), "in", "attn_out", "hc_attn_out"},
               {"hc_ffn", &block().hc_ffn(), "hc_attn_out", "moe_out", "out"}};
  for (const auto& s : sites) {
    Tensor x = gp.load(prefix() + s.x);
    const Backend::HcPreOut out = s.hc->pre(p, x, test::layer_scope(layer()));
    const std::string site = prefix() + s.site + ".";
    const std::string note = std::string("from golden ") + s.x;
    EXPECT_TRUE(test::check_tensor(site + "mixes", gp.host(out.mixes), "", note));
    EXPECT_TRUE(test::check_tensor(site + "pre", gp.host(out.pre), "", note));
    EXPECT_TRUE(test::check_tensor(site + "post", gp.host(out.post), "", note));
    EXPECT_TRUE(test::check_tensor(site + "comb", gp.host(out.comb), "", note));
    EXPECT_TRUE(test::check_tensor(site + "u", gp.host(out.u), "", note));

    // hc_post from the golden streams, sub-layer output and mixing weights.
    Backend::HcPreOut mix;
    mix.post = gp.load(site + "post");
    mix.comb = gp.load(site + "comb");
    Tensor y = s.hc->post(p, x, gp.load(prefix() + s.f), mix);
    EXPECT_TRUE(test::check_tensor(prefix() + s.y, gp.host(y), "",
                                   std::string("from golden ") + s.x + ", " + s.f + ", " + s.site + ".post/comb"));
  }
}

// ---- the norms in front of attention and MoE

TEST_P(GoldenBlockOps, AttentionAndFfnNorms) {
  GoldenPass gp(phase());
  const struct {
    const char* u;
    const WeightView* w;
    const char* y;
  } norms[] = {{"hc_attn.u", &block().weights().attn_norm, "attn_in"}, {"hc_ffn.u", &block().weights().ffn_norm, "ffn_in"}};
  for (const auto& s : norms) {
    Tensor u = gp.load(prefix() + s.u);
    Tensor y = gp.alloc({u.dim(0), u.dim(1)});
    gp.be().rms_norm(u, *s.w, eps(), y);
    EXPECT_TRUE(test::check_tensor(prefix() + s.y, gp.host(y), "", std::string("from golden ") + s.u));
  }
}

// ---- MoE: routing, routed experts, shared expert, their sum

TEST_P(GoldenBlockOps, MoeRoutingExpertsAndSum) {
  GoldenPass gp(phase());  // the pass's tokens are the golden tokens (hash routing of layer 0)
  Pass& p = gp.pass();
  const Moe& moe = block().moe();
  Tensor x = gp.load(prefix() + "ffn_in");
  const int64_t k = golden().config().num_experts_per_tok;

  Tensor weights, indices;
  moe.route(p, x, weights, indices);
  const std::vector<int64_t> gi = golden().i64(prefix() + "gate.indices");
  const test::GateComparison gate =
      test::compare_gate(gp.host(weights), gp.host_i64(indices), golden().f32(prefix() + "gate.weights"), gi, k);
  EXPECT_TRUE(test::check_rows_differ(prefix() + "gate.indices", gate.rows_differ, int64_t(gi.size()) / k,
                                      test::tolerance(prefix() + "gate.indices").rows_differ, "from golden ffn_in"));
  EXPECT_TRUE(test::check_errors(prefix() + "gate.weights", gate.errors, test::tolerance(prefix() + "gate.weights"),
                                 "per expert, rows with the golden expert set"));

  Tensor golden_weights = gp.load(prefix() + "gate.weights");
  Tensor golden_indices = gp.load_i32(gi, golden().info(prefix() + "gate.indices").shape);
  Tensor routed = moe.routed(p, x, golden_weights, golden_indices);
  EXPECT_TRUE(test::check_tensor(prefix() + "moe_routed", gp.host(routed), "", "from golden ffn_in and gate"));

  Tensor shared = moe.shared(p, x);
  EXPECT_TRUE(test::check_tensor(prefix() + "moe_shared", gp.host(shared), "", "from golden ffn_in"));

  Tensor sum = gp.alloc({x.dim(0), x.dim(1)});
  gp.be().add(gp.load(prefix() + "moe_routed"), gp.load(prefix() + "moe_shared"), sum);
  EXPECT_TRUE(test::check_tensor(prefix() + "moe_out", gp.host(sum), "", "golden routed + golden shared"));
}

INSTANTIATE_TEST_SUITE_P(AllLayers, GoldenBlockOps,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(std::string("prefill"), std::string("decode"))),
                         layer_phase_name);

// ---- the model's head: hc_head, final norm, logits

class GoldenHead : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { golden(); }
};

TEST_P(GoldenHead, HcHeadNormAndLogits) {
  const GoldenPhase ph = phase_named(GetParam());
  GoldenPass gp(ph);
  Backend& be = gp.be();
  const ModelConfig& c = golden().config();
  const ModelWeights& w = golden().weights();
  const std::string last = "L" + std::to_string(c.num_hidden_layers - 1) + "." + ph.name + ".out";
  const std::string pre = "head." + ph.name + ".";
  const int64_t n = ph.rows, D = c.hidden_size, V = c.vocab_size;

  Tensor y = gp.alloc({n, D});
  be.hc_head(gp.load(last), w.hc_head, float(c.hc_eps), float(c.rms_norm_eps), y);
  EXPECT_TRUE(test::check_tensor(pre + "hc_head_y", gp.host(y), "", "from golden " + last));

  Tensor normed = gp.alloc({n, D});
  be.rms_norm(gp.load(pre + "hc_head_y"), w.norm, float(c.rms_norm_eps), normed);
  EXPECT_TRUE(test::check_tensor(pre + "normed", gp.host(normed), "", "from golden hc_head_y"));

  // Logits of the golden normed rows, and of the whole head (Transformer::head) on the golden
  // streams, against the reference's fp32 logits (relative L2 per row <= 0.01).
  const test::Tolerance logits_tol{false, 0.01, 0.01, 0};
  std::vector<float> g = golden().outputs_f32(ph.decode() ? "target.logits" : "target.prefill_logits_all");
  if (ph.decode()) g = std::vector<float>(g.begin() + V, g.begin() + 2 * V);  // row 1: the decode call
  Tensor logits = gp.alloc({n, V});
  be.linear(gp.load(pre + "normed"), w.head, logits, {ActQuant::None, false});
  const std::string label = ph.decode() ? "target.logits[1]" : "target.prefill_logits_all";
  EXPECT_TRUE(test::check_errors(label, test::row_rel_l2(gp.host(logits), g, V), logits_tol,
                                 "head of golden " + pre + "normed"));

  Tensor chained = gp.alloc({n, V});
  golden().model().head(gp.pass(), gp.load(last), w.hc_head, w.norm, w.head, chained, "head");
  const std::vector<float> all = gp.host(chained);
  EXPECT_TRUE(test::check_errors(label, test::row_rel_l2(all, g, V), logits_tol,
                                 "Transformer::head of golden " + last));
  if (!ph.decode()) {  // the prefill's logits: its last row
    const std::vector<float> t0 = golden().outputs_f32("target.logits");
    EXPECT_TRUE(test::check_errors("target.logits[0]",
                                   test::row_rel_l2(std::vector<float>(all.end() - V, all.end()),
                                                    std::vector<float>(t0.begin(), t0.begin() + V), V),
                                   logits_tol, "Transformer::head of golden " + last + ", last row"));
  }
}

INSTANTIATE_TEST_SUITE_P(BothPhases, GoldenHead, ::testing::Values(std::string("prefill"), std::string("decode")),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// ---- RoPE tables

class GoldenRope : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() { golden(); }
};

// freqs.L{l} [T, r/2, (cos, sin)], recovered from the backend's rope op: rotating the pairs
// (1, 0) gives (cos θ, sin θ) rounded to bf16, too coarse for the 0.1% tolerance alone;
// rotating that result back by -θ gives (≈1, |v|·sin(φ - θ)) whose small second component
// (bf16-rounded, but ~2^-9 in size) measures the rounding, so θ = φ - asin(ε / |v|), φ the
// angle of the bf16 pair, is recovered to ~1e-5.
TEST_P(GoldenRope, FrequencyTablesMatchTheReference) {
  const int64_t l = GetParam();
  const std::string name = "freqs.L" + std::to_string(l);
  const std::vector<int64_t> shape = golden().info(name).shape;  // [T, r/2, 2]
  const int64_t T = shape.at(0), half = shape.at(1);
  const RopeSpec& spec = golden().model().blocks().at(size_t(l)).attention().rope();
  ASSERT_EQ(spec.rope_dims, 2 * half) << name;

  const std::vector<float> table = test::rope_table(spec, T);
  EXPECT_TRUE(test::check_tensor(name, table, "", "backend rope of unit pairs, refined by the inverse rotation"));
}

INSTANTIATE_TEST_SUITE_P(AllLayers, GoldenRope, ::testing::Values(0, 1, 2, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return "L" + std::to_string(info.param); });

}  // namespace
}  // namespace dsv4

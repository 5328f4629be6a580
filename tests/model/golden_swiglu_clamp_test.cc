// The SwiGLU clamp (swiglu_limit): h = silu(min(g, L)) · clamp(u, ±L). It is never active
// in the golden data (largest pre-activations ~4.6 for L = 10), so these tests drive the
// op, the routed experts and the shared expert with inputs of our own whose pre-activations
// exceed L, compare with the formula composed from the engine's other ops, and check that
// the result without the clamp would differ.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/number_formats.h"
#include "support/golden_support.h"

namespace dsv4 {
namespace {

using test::golden;
using test::GoldenPass;

class GoldenSwigluClamp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { golden(); }
  float limit() const { return float(golden().config().swiglu_limit); }
};

// round_bf16(wt · silu(min(g, L)) · clamp(u, ±L)) in the reference's fp32 order; L = 0: no clamp.
float swiglu(float g, float u, float limit, float wt = 1.0f) {
  if (limit > 0) {
    u = std::clamp(u, -limit, limit);
    g = std::min(g, limit);
  }
  return round_bf16(wt * (g / (1.0f + std::exp(-g)) * u));
}

double min_of(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end()); }
double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

// Golden ffn_in rows scaled by 32 (exact in bf16 and under the power-of-two FP8 activation
// scales), so that the experts' pre-activations reach well past the limit.
std::vector<float> large_inputs(int64_t rows) {
  std::vector<float> x = golden().f32("L1.prefill.ffn_in");
  x.resize(size_t(rows * golden().config().hidden_size));
  for (float& v : x) v *= 32.0f;
  return x;
}

const test::Tolerance kSame{false, 1e-3, 1e-3, 0};  // the same computation up to bf16 rounding order

TEST_F(GoldenSwigluClamp, SwigluOpClampsGateAndUp) {
  ASSERT_GT(limit(), 0.0f) << "tiny-a has swiglu_limit " << limit();
  GoldenPass gp(std::vector<int64_t>{}, "prefill");
  const int64_t n = 4, w = 96;
  std::vector<float> g(size_t(n * w)), u(size_t(n * w));
  for (int64_t i = 0; i < n * w; ++i) {  // bf16-exact values spanning [-40, 40), in a scrambled order
    g[size_t(i)] = float((i * 37) % 320) * 0.25f - 40.0f;
    u[size_t(i)] = float((i * 53 + 11) % 320) * 0.25f - 40.0f;
  }
  std::vector<float> clamped(g.size()), unclamped(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    clamped[i] = swiglu(g[i], u[i], limit());
    unclamped[i] = swiglu(g[i], u[i], 0.0f);
  }
  Tensor h = gp.alloc({n, w});
  gp.be().swiglu(gp.load(g, {n, w}), gp.load(u, {n, w}), limit(), h);
  const std::vector<float> got = gp.host(h);
  EXPECT_TRUE(test::check_errors("swiglu(g, u, L=10)", test::row_rel_l2(got, clamped, w), kSame,
                                 "vs silu(min(g, L)) * clamp(u, +-L)"));
  const double without = min_of(test::row_rel_l2(got, unclamped, w));
  EXPECT_GT(without, 0.1) << "swiglu: the clamped result is within " << without
                          << " (per-row relative L2) of the unclamped formula: the clamp has no effect";

  gp.be().swiglu(gp.load(g, {n, w}), gp.load(u, {n, w}), 0.0f, h);  // limit 0 = no clamp
  EXPECT_TRUE(test::check_errors("swiglu(g, u, L=0)", test::row_rel_l2(gp.host(h), unclamped, w), kSame,
                                 "vs silu(g) * u"));
}

TEST_F(GoldenSwigluClamp, RoutedExpertsClampPreActivations) {
  const ModelConfig& c = golden().config();
  const Block& block = golden().model().blocks().at(1);
  const MoeWeights& mw = block.weights().ffn;
  const int64_t n = 8, D = c.hidden_size, k = c.num_experts_per_tok, E = c.n_routed_experts;
  GoldenPass gp(std::vector<int64_t>{}, "prefill");
  Backend& be = gp.be();
  const std::vector<float> xv = large_inputs(n);
  Tensor x = gp.load(xv, {n, D});
  std::vector<float> wts(size_t(n * k));
  std::vector<int64_t> idx(size_t(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) {
      idx[size_t(r * k + j)] = (r + 3 * j) % E;  // every expert used
      wts[size_t(r * k + j)] = j == 0 ? 0.875f : 0.625f;
    }
  Tensor routed = block.moe().routed(gp.pass(), x, gp.load(wts, {n, k}), gp.load_i32(idx, {n, k}));
  const std::vector<float> got = gp.host(routed);

  // The reference's Expert: w2(bf16(weight · silu(min(w1 x, L)) · clamp(w3 x, ±L))), summed
  // over the row's experts in ascending expert id.
  std::vector<float> expected(size_t(n * D), 0.0f), unclamped(size_t(n * D), 0.0f);
  double largest_gate = 0, largest_up = 0;
  for (int64_t e = 0; e < E; ++e) {
    const ExpertWeights& ew = mw.experts.at(size_t(e));
    const int64_t inter = ew.w1.rows;
    Tensor g = gp.alloc({n, inter}), u = gp.alloc({n, inter});
    be.linear(x, ew.w1, g);
    be.linear(x, ew.w3, u);
    const std::vector<float> gv = gp.host(g), uv = gp.host(u);
    largest_gate = std::max(largest_gate, max_abs(gv));
    largest_up = std::max(largest_up, max_abs(uv));
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<float> h(gv.size());
      for (int64_t r = 0; r < n; ++r) {
        float wt = 0;
        for (int64_t j = 0; j < k; ++j)
          if (idx[size_t(r * k + j)] == e) wt = wts[size_t(r * k + j)];
        for (int64_t i = 0; i < inter; ++i)
          h[size_t(r * inter + i)] = swiglu(gv[size_t(r * inter + i)], uv[size_t(r * inter + i)],
                                            pass == 0 ? limit() : 0.0f, wt);
      }
      Tensor y = gp.alloc({n, D});
      be.linear(gp.load(h, {n, inter}), ew.w2, y);
      const std::vector<float> yv = gp.host(y);
      std::vector<float>& dst = pass == 0 ? expected : unclamped;
      for (int64_t r = 0; r < n; ++r) {
        bool used = false;
        for (int64_t j = 0; j < k; ++j) used |= idx[size_t(r * k + j)] == e;
        if (used)
          for (int64_t d = 0; d < D; ++d) dst[size_t(r * D + d)] += yv[size_t(r * D + d)];
      }
    }
  }
  std::printf("[golden] routed experts: largest |gate| %.1f, |up| %.1f (limit %.1f)\n", largest_gate, largest_up,
              double(limit()));
  ASSERT_GT(largest_gate, 2.0 * limit()) << "inputs too small to exercise the clamp";
  EXPECT_TRUE(test::check_errors("L1 moe_routed, |pre-activations| > L", test::row_rel_l2(got, expected, D), kSame,
                                 "vs the clamped expert formula"));
  const double without = min_of(test::row_rel_l2(got, unclamped, D));
  EXPECT_GT(without, 0.05) << "routed experts: within " << without
                           << " (per-row relative L2) of the unclamped result: the clamp has no effect";
}

TEST_F(GoldenSwigluClamp, SharedExpertClampsPreActivations) {
  const ModelConfig& c = golden().config();
  const Block& block = golden().model().blocks().at(1);
  const ExpertWeights& sw = block.weights().ffn.shared;
  const int64_t n = 8, D = c.hidden_size, inter = sw.w1.rows;
  GoldenPass gp(std::vector<int64_t>{}, "prefill");
  Backend& be = gp.be();
  Tensor x = gp.load(large_inputs(n), {n, D});
  const std::vector<float> got = gp.host(block.moe().shared(gp.pass(), x));

  Tensor g = gp.alloc({n, inter}), u = gp.alloc({n, inter});
  be.linear(x, sw.w1, g);
  be.linear(x, sw.w3, u);
  const std::vector<float> gv = gp.host(g), uv = gp.host(u);
  std::printf("[golden] shared expert: largest |gate| %.1f, |up| %.1f (limit %.1f)\n", max_abs(gv), max_abs(uv),
              double(limit()));
  ASSERT_GT(max_abs(gv), 2.0 * limit()) << "inputs too small to exercise the clamp";
  std::vector<float> results[2];
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<float> h(gv.size());
    for (size_t i = 0; i < h.size(); ++i) h[i] = swiglu(gv[i], uv[i], pass == 0 ? limit() : 0.0f);
    Tensor y = gp.alloc({n, D});
    be.linear(gp.load(h, {n, inter}), sw.w2, y);
    results[pass] = gp.host(y);
  }
  EXPECT_TRUE(test::check_errors("L1 moe_shared, |pre-activations| > L", test::row_rel_l2(got, results[0], D), kSame,
                                 "vs the clamped expert formula"));
  const double without = min_of(test::row_rel_l2(got, results[1], D));
  EXPECT_GT(without, 0.05) << "shared expert: within " << without
                           << " (per-row relative L2) of the unclamped result: the clamp has no effect";
}

}  // namespace
}  // namespace dsv4

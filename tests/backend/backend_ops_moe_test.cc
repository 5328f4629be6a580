// Mixture of experts, CPU backend against the reference backend (see backend_ops_test.cc):
// moe_route and moe_experts.
#include <algorithm>

#include "op_compare.h"

namespace dsv4::test {
namespace {

// Every scoring function, with and without the selection bias, and hash routing by token (I64 and
// I32 tables); logits with ties (equal scores go to the lower expert id) and past softplus's
// linear threshold (20).
TEST(BackendOps, MoeRoute) {
  const int64_t n = 5, V = 11;
  for (int64_t E : {8, 33})
    for (int64_t k : {1, 2, 6}) {
      std::vector<float> logits = normal_bf16(n * E, uint64_t(E + k), 2.0f);
      logits[3] = logits[5];
      logits[size_t(E + 1)] = logits[size_t(E + 2)] = 1.25f;
      logits[size_t(2 * E)] = 23.0f;
      const TestWeight bias = weight_of(normal_bf16(E, uint64_t(E), 0.1f), WeightFormat::F32);
      std::vector<int64_t> hash(size_t(V * k));
      std::vector<int32_t> hash32(hash.size());
      for (size_t i = 0; i < hash.size(); ++i) hash32[i] = int32_t(hash[i] = int64_t((i * 7 + 3) % size_t(E)));
      WeightView tid64, tid32;
      tid64.format = WeightFormat::I64;
      tid32.format = WeightFormat::I32;
      tid64.rows = tid32.rows = V;
      tid64.cols = tid32.cols = k;
      tid64.data = reinterpret_cast<const uint8_t*>(hash.data());
      tid32.data = reinterpret_cast<const uint8_t*>(hash32.data());
      const std::vector<int32_t> tokens = {0, 10, 3, 3, 7};
      for (ScoringFunc func : {ScoringFunc::SqrtSoftplus, ScoringFunc::Sigmoid, ScoringFunc::Softmax})
        for (int routing = 0; routing < 4; ++routing) {  // no bias, bias, hash I64, hash I32
          Backend::RouteParams p;
          p.top_k = k;
          p.func = func;
          p.route_scale = 1.5f;
          p.bias = routing == 1 ? &bias.view : nullptr;
          p.tid2eid = routing == 2 ? &tid64 : routing == 3 ? &tid32 : nullptr;
          p.tokens = tokens;
          auto run = [&](Backend& be) {
            std::vector<float> lin(logits), weights(size_t(n * k), NAN);
            std::vector<int32_t> idx(size_t(n * k), -7);
            Tensor tw = tensor(weights, {n, k}), ti = tensor(idx, {n, k});
            be.moe_route(tensor(lin, {n, E}), p, tw, ti);
            for (int32_t i : idx) weights.push_back(float(i));
            return weights;
          };
          const std::vector<float> want = run(reference());
          for_each_cpu(n, [&](Backend& be) {
            EXPECT_TRUE(same_bits(want, run(be))) << "E=" << E << " k=" << k << " func=" << int(func)
                                                  << " routing=" << routing;
          });
        }
    }
}

// Not exact: each expert's down projection w2·h sums its products in the kernels' order (see
// Linear). The inputs make the rest exact — narrow activations and weights, whose products with w1
// and w3 sum exactly in f32 in any order (checked: linear gives the same bits on both) — so h is the
// same on both, and each expert's bf16 output y_e is the reference's unless its exact value lies
// near a rounding boundary (product_bound). The rows' sums over their experts run in the same order
// on both (ascending expert id): equal where every y_e is, else within the y_e's differences plus a
// rounding of each partial sum, k·u·Σ|y_e|.
TEST(BackendOps, MoeExperts) {
  struct Shape {
    int64_t D, inter;
  };
  const int64_t E = 5;
  // BF16 experts (conversions) take their activations unquantized, as linear() does.
  for (WeightFormat format :
       {WeightFormat::FP4, WeightFormat::FP8, WeightFormat::BF16, WeightFormat::NVFP4, WeightFormat::FP8F,
        WeightFormat::INT4})
    for (const Shape& s : {Shape{128, 256}, Shape{256, 128}}) {
      std::vector<TestWeight> owned;
      std::vector<ExpertWeights> experts;
      for (int64_t e = 0; e < E; ++e) {
        const uint64_t seed = uint64_t(e * 10 + s.D + int(format));
        owned.push_back(make_weight(format, s.inter, s.D, seed, Spread::Narrow));
        owned.push_back(make_weight(format, s.D, s.inter, seed + 1));
        owned.push_back(make_weight(format, s.inter, s.D, seed + 2, Spread::Narrow));
      }
      for (int64_t e = 0; e < E; ++e)
        experts.push_back({owned[size_t(3 * e)].view, owned[size_t(3 * e + 1)].view, owned[size_t(3 * e + 2)].view});
      for (int64_t n : {1, 4, 9})
        for (int64_t k : {1, 3, 6}) {  // 6 of 5 experts: repeats, summed in slot order
          std::mt19937_64 rng(uint64_t(n * 10 + k));
          std::vector<int32_t> idx(size_t(n * k));
          for (auto& i : idx) i = int32_t(rng() % uint64_t(E));
          std::vector<float> wts(size_t(n * k));
          for (auto& w : wts) w = 0.05f + float(rng() % 1000) / 1000.0f;
          const std::vector<float> x = narrow_activations(n * s.D, uint64_t(n + k + s.D));
          for (float limit : {0.0f, 10.0f}) {
            SCOPED_TRACE(std::string(weight_format_name(format)) + " D=" + std::to_string(s.D) + " inter=" +
                         std::to_string(s.inter) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                         " limit=" + std::to_string(limit));
            auto run = [&](Backend& be) {
              std::vector<float> xin(x), win(wts), routed(size_t(n * s.D), NAN);
              std::vector<int32_t> iin(idx);
              Tensor tr = tensor(routed, {n, s.D});
              be.moe_experts(tensor(xin, {n, s.D}), tensor(win, {n, k}), tensor(iin, {n, k}), experts, limit, tr);
              return routed;
            };
            const std::vector<float> want = run(reference());
            // Per row and slot: g, u (exact), h, y_e on the reference backend, and y_e's bound.
            std::vector<double> bound(want.size(), 0.0), mass(want.size(), 0.0);
            for (int64_t r = 0; r < n; ++r)
              for (int64_t j = 0; j < k; ++j) {
                const ExpertWeights& ex = experts[size_t(idx[size_t(r * k + j)])];
                std::vector<float> xr(x.begin() + r * s.D, x.begin() + (r + 1) * s.D), g(size_t(s.inter)),
                    u(size_t(s.inter)), y(size_t(s.D));
                Tensor tx = tensor(xr, {1, s.D}), tg = tensor(g, {1, s.inter}), tu = tensor(u, {1, s.inter});
                reference().linear(tx, ex.w1, tg, {});
                reference().linear(tx, ex.w3, tu, {});
                if (r == 0 && limit == 0)
                  for_each_cpu(1, [&](Backend& be) {  // the premise: these products are exact
                    std::vector<float> g2(g.size()), u2(u.size());
                    Tensor tg2 = tensor(g2, {1, s.inter}), tu2 = tensor(u2, {1, s.inter});
                    be.linear(tx, ex.w1, tg2, {});
                    be.linear(tx, ex.w3, tu2, {});
                    ASSERT_TRUE(same_bits(g, g2) && same_bits(u, u2)) << "w1/w3 products are not exact";
                  });
                for (int64_t c = 0; c < s.inter; ++c) {
                  float gv = g[size_t(c)], uv = u[size_t(c)];
                  if (limit > 0) {
                    uv = std::clamp(uv, -limit, limit);
                    gv = std::min(gv, limit);
                  }
                  g[size_t(c)] = round_bf16(wts[size_t(r * k + j)] * (gv / (1.0f + std::exp(-gv)) * uv));
                }
                Tensor th = tensor(g, {1, s.inter}), ty = tensor(y, {1, s.D});
                reference().linear(th, ex.w2, ty, {});
                std::vector<double> b(size_t(s.D));
                const bool quantized = format != WeightFormat::BF16 && format != WeightFormat::INT4;  // (W4A16)
                product_bound(g.data(), 1, s.inter, ex.w2, 0, s.D, quantized, true, s.D, b);
                for (int64_t c = 0; c < s.D; ++c) {
                  bound[size_t(r * s.D + c)] += b[size_t(c)];
                  mass[size_t(r * s.D + c)] += std::fabs(y[size_t(c)]);
                }
              }
            for (size_t i = 0; i < bound.size(); ++i)
              if (bound[i] > 0) bound[i] += double(k) * kU * mass[i];
            for_each_cpu(n, [&](Backend& be) { EXPECT_TRUE(within(want, run(be), bound)); });
          }
        }
    }
  // An expert index out of range is an error on both.
  const TestWeight w = make_weight(WeightFormat::FP4, 128, 128, 1);
  const std::vector<ExpertWeights> one = {{w.view, w.view, w.view}};
  std::vector<float> x(128), wt = {1.0f}, routed(128);
  std::vector<int32_t> idx = {1};
  Tensor tx = tensor(x, {1, 128}), tw = tensor(wt, {1, 1}), ti = tensor(idx, {1, 1}), tr = tensor(routed, {1, 128});
  EXPECT_TRUE(throws_error([&] { reference().moe_experts(tx, tw, ti, one, 0, tr); }));
  for_each_cpu(1, [&](Backend& be) { EXPECT_TRUE(throws_error([&] { be.moe_experts(tx, tw, ti, one, 0, tr); })); });
}

}  // namespace
}  // namespace dsv4::test

// Row-wise ops and hyper-connections, CPU backend against the reference backend (see
// backend_ops_test.cc): rms_norm, head_rms_norm, rope, fake_quant_fp8, hadamard_fp4, hc_pre,
// hc_post, hc_head, stream_mean, concat_cols.
#include "op_compare.h"

namespace dsv4::test {
namespace {

TEST(BackendOps, RmsNorm) {
  for (int64_t W : {1, 3, 7, 8, 129, 257})
    for (int64_t n : {1, 3, 7}) {
      const std::vector<float> x = activations(n * W, uint64_t(W * 10 + n));
      const TestWeight wb = weight_of(normal_bf16(W, uint64_t(W)), WeightFormat::BF16);
      const TestWeight wf = weight_of(normal_bf16(W, uint64_t(W + 1)), WeightFormat::F32);
      const WeightView unbound;
      for (const WeightView* w : {&wb.view, &wf.view, &unbound}) {
        auto run = [&](Backend& be) {
          std::vector<float> xin(x), y(x.size());
          Tensor tx = tensor(xin, {n, W}), ty = tensor(y, {n, W});
          be.rms_norm(tx, *w, 1e-6f, ty);
          be.rms_norm(tx, *w, 1e-6f, tx);  // in place, as the model calls it
          y.insert(y.end(), xin.begin(), xin.end());
          return y;
        };
        const std::vector<float> want = run(reference());
        for_each_cpu(n, [&](Backend& be) {
          EXPECT_TRUE(same_bits(want, run(be))) << "W=" << W << " n=" << n << " weight " << (w->present() ?
              weight_format_name(w->format) : "unbound");
        });
      }
    }
}

TEST(BackendOps, HeadRmsNorm) {
  for (int64_t d : {1, 7, 64, 129})
    for (int64_t heads : {1, 3})
      for (int64_t n : {1, 3}) {
        const std::vector<float> q = activations(n * heads * d, uint64_t(d + heads + n));
        auto run = [&](Backend& be) {
          std::vector<float> v(q);
          Tensor t = tensor(v, {n, heads, d});
          be.head_rms_norm(t, 1e-6f);
          return v;
        };
        const std::vector<float> want = run(reference());
        for_each_cpu(n, [&](Backend& be) { EXPECT_TRUE(same_bits(want, run(be))) << "d=" << d << " heads=" << heads; });
      }
}

TEST(BackendOps, Rope) {
  RopeSpec plain;
  plain.rope_dims = 64;
  RopeSpec yarn = plain;
  yarn.theta = 160000;
  yarn.yarn = true;
  yarn.factor = 16;
  yarn.original_max_position = 65536;
  RopeSpec small = yarn;  // a short ramp: the correction range is clamped at both ends
  small.rope_dims = 6;
  small.original_max_position = 64;
  const std::vector<int64_t> positions = {0, 1, 7, 4097, 131071};
  for (const RopeSpec* spec : {&plain, &yarn, &small})
    for (int64_t width : {spec->rope_dims, spec->rope_dims + 7, int64_t(128)})
      for (int64_t heads : {1, 3})
        for (bool inverse : {false, true}) {
          const int64_t n = int64_t(positions.size());
          const std::vector<float> x = activations(n * heads * width, uint64_t(width + heads));
          auto run = [&](Backend& be) {
            std::vector<float> v(x);
            Tensor t = tensor(v, {n, heads, width});
            be.rope(t, positions, *spec, inverse);
            return v;
          };
          const std::vector<float> want = run(reference());
          for_each_cpu(n, [&](Backend& be) {
            EXPECT_TRUE(same_bits(want, run(be))) << "rope dims " << spec->rope_dims << " yarn " << spec->yarn
                                                  << " width " << width << " heads " << heads << " inverse " << inverse;
          });
        }
}

TEST(BackendOps, FakeQuantFp8) {
  for (int64_t W : {7, 128, 200})
    for (int block : {64, 128}) {
      std::vector<float> x = activations(3 * W, uint64_t(W + block));
      x[1] = 1e30f;  // a saturating block
      for (int64_t i = 0; i < W; ++i) x[size_t(2 * W + i)] *= 1e-6f;  // scales near the 1e-4 floor
      for (int64_t cols : {W, W - 7}) {
        auto run = [&](Backend& be) {
          std::vector<float> v(x);
          Tensor t = tensor(v, {3, W});
          be.fake_quant_fp8(t, cols, block);
          return v;
        };
        const std::vector<float> want = run(reference());
        for_each_cpu(3, [&](Backend& be) { EXPECT_TRUE(same_bits(want, run(be))) << "W=" << W << " cols=" << cols; });
      }
    }
}

TEST(BackendOps, HadamardFp4) {
  for (int64_t w : {1, 2, 8, 16, 32, 64, 128, 512})
    for (int64_t n : {1, 3}) {
      std::vector<float> x = activations(n * w, uint64_t(w + n));
      x[0] = 3e4f;
      auto run = [&](Backend& be) {
        std::vector<float> v(x);
        Tensor t = tensor(v, {n, w});
        be.hadamard_fp4(t);
        return v;
      };
      const std::vector<float> want = run(reference());
      for_each_cpu(n, [&](Backend& be) { EXPECT_TRUE(same_bits(want, run(be))) << "w=" << w << " n=" << n; });
    }
  std::vector<float> v(12);
  Tensor t = tensor(v, {1, 12});
  EXPECT_TRUE(throws_error([&] { reference().hadamard_fp4(t); }));
  for_each_cpu(1, [&](Backend& be) { EXPECT_TRUE(throws_error([&] { be.hadamard_fp4(t); })); });
}

// ---- hyper-connections

struct HcData {
  TestWeight fn, base, scale;
  std::vector<float> x;  // [n, hc, D]
};

// fn [mixes, hc·D], base [mixes], scale [scales]. Exact: every product fn·x is exact and every
// partial sum a multiple of 2^-14 below 2^6 — exact in f32 whatever the order, so the CPU's product
// kernels give the reference's bits and so must everything computed from them.
HcData hc_data(int64_t n, int64_t hc, int64_t D, int64_t mixes, int64_t scales, bool exact, uint64_t seed) {
  HcData d;
  std::vector<float> fn;
  if (exact) {
    fn = narrow_activations(mixes * hc * D, seed);
    for (float& v : fn) v *= 0x1p-8f;
    d.x = narrow_activations(n * hc * D, seed + 1);
  } else {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(float(hc * D)));
    fn.resize(size_t(mixes * hc * D));
    for (float& v : fn) v = normal(rng);
    d.x = activations(n * hc * D, seed + 1);
  }
  d.fn = weight_of(fn, WeightFormat::F32, mixes);
  std::vector<float> base = normal_bf16(mixes, seed + 2), scale = normal_bf16(scales, seed + 3, 0.5f);
  d.base = weight_of(base, WeightFormat::F32);
  d.scale = weight_of(scale, WeightFormat::F32);
  return d;
}

// The mixes' bound: m_j = ρ·(fn_j·x̄) with fn_j·x̄ a sum of hc·D products (2·K·u·Σ|fn·x| between two
// orders), times ρ (same ρ on both sides: one more rounding).
std::vector<double> mixes_bound(const HcData& d, int64_t n, int64_t width, const std::vector<float>& m_ref) {
  const int64_t mixes = d.fn.view.rows;
  std::vector<double> b(size_t(n * mixes));
  for (int64_t r = 0; r < n; ++r) {
    double ss = 0;
    for (int64_t k = 0; k < width; ++k) ss += double(d.x[size_t(r * width + k)]) * d.x[size_t(r * width + k)];
    const double rho = 1.0 / std::sqrt(ss / double(width) + 1e-6);
    for (int64_t j = 0; j < mixes; ++j) {
      double mass = 0;
      for (int64_t k = 0; k < width; ++k)
        mass += std::fabs(double(d.x[size_t(r * width + k)]) * weight_value(d.fn.view, j, k));
      const double m = std::fabs(m_ref[size_t(r * mixes + j)]);
      b[size_t(r * mixes + j)] = 2.0 * double(width) * kU * mass * rho * 1.01 + 2.0 * kU * m;
    }
  }
  return b;
}

// y = bf16(Σ_j p_j·X_j) with p the reference's weights and |Δp_j| ≤ dp[j] on the other backend: each
// unrounded sum lies within Σ_j dp_j·|X_j| + hc·u·Σ|p_j·X_j| of the exact sum with p (double), so
// the bf16 outputs agree unless that interval holds a rounding boundary (bf16_spread).
std::vector<double> stream_sum_bound(const HcData& d, int64_t n, int64_t hc, int64_t D, const std::vector<float>& p,
                                     const std::vector<double>& dp) {
  std::vector<double> b(size_t(n * D));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < D; ++k) {
      double exact = 0, err = 0, mass = 0;
      for (int64_t j = 0; j < hc; ++j) {
        const double xv = d.x[size_t((r * hc + j) * D + k)];
        exact += p[size_t(r * hc + j)] * xv;
        err += dp[size_t(r * hc + j)] * std::fabs(xv);
        mass += std::fabs(p[size_t(r * hc + j)] * xv);
      }
      b[size_t(r * D + k)] = bf16_spread(exact, err + double(hc + 1) * kU * mass);
    }
  return b;
}

// On exactly summable data every output is bit-identical. On general data the mixes differ by the
// product's summation order (mixes_bound); pre = σ(m·s0 + b) + eps and post = 2σ(m·s1 + b) move by
// at most σ' ≤ 1/4 times that (plus a few roundings); comb goes through a softmax and 20 Sinkhorn
// normalisations, each of which at most doubles a relative perturbation of its inputs in the worst
// case but contracts it in practice (Sinkhorn converges): 8·|s2|·max Δm + 64u bounds it with a wide
// margin (observed: below 0.02·|s2|·max Δm, as the mixes' actual differences lie far inside their
// bound). u = Σ_j pre_j·X_j follows from pre (stream_sum_bound). With GCC's default FMA contraction the
// exact case holds where both backends' code fuses alike (see reference_backend.h).
TEST(BackendOps, HcPre) {
  for (bool exact : {true, false})
    for (int64_t hc : {1, 3, 4})
      for (int64_t D : {7, 64, 129})
        for (int64_t n : {1, 3})
          for (int64_t iters : {1, 20}) {
            SCOPED_TRACE(std::string(exact ? "exact" : "general") + " hc=" + std::to_string(hc) + " D=" +
                         std::to_string(D) + " n=" + std::to_string(n) + " iters=" + std::to_string(iters));
            const int64_t mixes = (2 + hc) * hc;
            const HcData d = hc_data(n, hc, D, mixes, 3, exact, uint64_t(hc * 100 + D + n));
            const HcWeights w{d.fn.view, d.base.view, d.scale.view};
            struct Out {
              std::vector<float> u, post, comb, mixes, pre;
            };
            auto run = [&](Backend& be) {
              Out o{std::vector<float>(size_t(n * D)), std::vector<float>(size_t(n * hc)),
                    std::vector<float>(size_t(n * hc * hc)), std::vector<float>(size_t(n * mixes)),
                    std::vector<float>(size_t(n * hc))};
              std::vector<float> x(d.x);
              Backend::HcPreOut out{tensor(o.u, {n, D}), tensor(o.post, {n, hc}), tensor(o.comb, {n, hc, hc}),
                                    tensor(o.mixes, {n, mixes}), tensor(o.pre, {n, hc})};
              be.hc_pre(tensor(x, {n, hc, D}), w, iters, 1e-6f, 1e-6f, out);
              return o;
            };
            const Out want = run(reference());
            const float s0 = std::fabs(weight_value(d.scale.view, 0, 0));
            const float s1 = std::fabs(weight_value(d.scale.view, 0, 1));
            const float s2 = std::fabs(weight_value(d.scale.view, 0, 2));
            const std::vector<double> dm = mixes_bound(d, n, hc * D, want.mixes);
            std::vector<double> dpre(size_t(n * hc)), dpost(size_t(n * hc)), dcomb(size_t(n * hc * hc));
            for (int64_t r = 0; r < n; ++r) {
              double max_dm = 0;
              for (int64_t j = 0; j < mixes; ++j) max_dm = std::max(max_dm, dm[size_t(r * mixes + j)]);
              for (int64_t j = 0; j < hc; ++j) {
                dpre[size_t(r * hc + j)] = 0.25 * s0 * dm[size_t(r * mixes + j)] + 4 * kU;
                dpost[size_t(r * hc + j)] = 0.5 * s1 * dm[size_t(r * mixes + hc + j)] + 8 * kU;
              }
              for (int64_t i = 0; i < hc * hc; ++i) dcomb[size_t(r * hc * hc + i)] = 8 * s2 * max_dm + 64 * kU;
            }
            const std::vector<double> du = stream_sum_bound(d, n, hc, D, want.pre, dpre);
            for_each_cpu(n, [&](Backend& be) {
              const Out got = run(be);
              if (exact) {
                EXPECT_TRUE(same_bits(want.mixes, got.mixes)) << "mixes";
                EXPECT_TRUE(same_bits(want.pre, got.pre)) << "pre";
                EXPECT_TRUE(same_bits(want.post, got.post)) << "post";
                EXPECT_TRUE(same_bits(want.comb, got.comb)) << "comb";
                EXPECT_TRUE(same_bits(want.u, got.u)) << "u";
              } else {
                EXPECT_TRUE(within(want.mixes, got.mixes, dm)) << "mixes";
                EXPECT_TRUE(within(want.pre, got.pre, dpre)) << "pre";
                EXPECT_TRUE(within(want.post, got.post, dpost)) << "post";
                EXPECT_TRUE(within(want.comb, got.comb, dcomb)) << "comb";
                EXPECT_TRUE(within(want.u, got.u, du)) << "u";
              }
            });
          }
}

TEST(BackendOps, HcPost) {
  for (int64_t hc : {1, 3, 4})
    for (int64_t D : {8, 136})  // (the CPU backend takes widths of whole 8-lane vectors)
      for (int64_t n : {1, 3}) {
        const std::vector<float> x = activations(n * hc * D, uint64_t(hc + D + n)), f = activations(n * D, uint64_t(D));
        std::vector<float> post = normal_bf16(n * hc, 5), comb = normal_bf16(n * hc * hc, 6, 0.5f);
        for (float& p : post) p = 2.0f * std::fabs(p) / (1.0f + std::fabs(p));  // in (0, 2) as 2σ(·)
        auto run = [&](Backend& be) {
          std::vector<float> xin(x), fin(f), pin(post), cin(comb), y(x.size());
          Tensor ty = tensor(y, {n, hc, D});
          be.hc_post(tensor(xin, {n, hc, D}), tensor(fin, {n, D}), tensor(pin, {n, hc}), tensor(cin, {n, hc, hc}), ty);
          return y;
        };
        const std::vector<float> want = run(reference());
        for_each_cpu(n, [&](Backend& be) { EXPECT_TRUE(same_bits(want, run(be))) << "hc=" << hc << " D=" << D; });
      }
}

// As HcPre: exact data gives the same bits; otherwise the mixes' bound, through σ' ≤ 1/4, into the sum.
TEST(BackendOps, HcHead) {
  for (bool exact : {true, false})
    for (int64_t hc : {1, 3, 4})
      for (int64_t D : {7, 64, 129})
        for (int64_t n : {1, 3}) {
          SCOPED_TRACE(std::string(exact ? "exact" : "general") + " hc=" + std::to_string(hc) + " D=" +
                       std::to_string(D) + " n=" + std::to_string(n));
          const HcData d = hc_data(n, hc, D, hc, 1, exact, uint64_t(hc * 10 + D + n));
          const HcHeadWeights w{d.fn.view, d.base.view, d.scale.view};
          auto run = [&](Backend& be) {
            std::vector<float> x(d.x), y(size_t(n * D));
            Tensor ty = tensor(y, {n, D});
            be.hc_head(tensor(x, {n, hc, D}), w, 1e-6f, 1e-6f, ty);
            return y;
          };
          const std::vector<float> want = run(reference());
          // The weights p_j = σ(m_j·s + b_j) + eps, recomputed here in double for the bound's Σ|p·X|.
          const int64_t width = hc * D;
          std::vector<float> m(size_t(n * hc)), p(size_t(n * hc));
          for (int64_t r = 0; r < n; ++r) {
            double ss = 0;
            for (int64_t k = 0; k < width; ++k) ss += double(d.x[size_t(r * width + k)]) * d.x[size_t(r * width + k)];
            const double rho = 1.0 / std::sqrt(ss / double(width) + 1e-6);
            for (int64_t j = 0; j < hc; ++j) {
              double dot = 0;
              for (int64_t k = 0; k < width; ++k)
                dot += double(d.x[size_t(r * width + k)]) * weight_value(d.fn.view, j, k);
              m[size_t(r * hc + j)] = float(rho * dot);
              const double z =
                  m[size_t(r * hc + j)] * weight_value(d.scale.view, 0, 0) + weight_value(d.base.view, 0, j);
              p[size_t(r * hc + j)] = float(1.0 / (1.0 + std::exp(-z)) + 1e-6);
            }
          }
          const std::vector<double> dm = mixes_bound(d, n, width, m);
          std::vector<double> dp(size_t(n * hc));
          const double s = std::fabs(weight_value(d.scale.view, 0, 0));
          for (size_t i = 0; i < dp.size(); ++i) dp[i] = 0.25 * s * dm[i] + 4 * kU;
          const std::vector<double> dy = stream_sum_bound(d, n, hc, D, p, dp);
          for_each_cpu(n, [&](Backend& be) {
            if (exact) EXPECT_TRUE(same_bits(want, run(be)));
            else EXPECT_TRUE(within(want, run(be), dy));
          });
        }
}

// The DSpark taps' mean of the streams: bits against the reference, and on values whose sum is
// exact in fp32 (multiples of 1/8 below 2^10), exactly (sum / hc) rounded to bf16.
TEST(BackendOps, StreamMean) {
  for (int64_t hc : {1, 3, 4})
    for (int64_t D : {7, 64, 129})
      for (int64_t n : {1, 3}) {
        const std::vector<float> x = activations(n * hc * D, uint64_t(hc * 100 + D + n));
        std::vector<float> exact_values(x.size());
        for (size_t i = 0; i < x.size(); ++i) exact_values[i] = std::round(x[i] * 64.0f) / 8.0f;
        const std::vector<float>& exact = exact_values;
        for (const std::vector<float>* data : {&x, &exact}) {
          auto run = [&](Backend& be) {
            std::vector<float> xin(*data), y(size_t(n * D));
            Tensor ty = tensor(y, {n, D});
            be.stream_mean(tensor(xin, {n, hc, D}), ty);
            return y;
          };
          const std::vector<float> want = run(reference());
          for_each_cpu(n, [&](Backend& be) { EXPECT_TRUE(same_bits(want, run(be))) << "hc=" << hc << " D=" << D; });
          if (data != &exact) continue;
          for (int64_t r = 0; r < n; ++r)
            for (int64_t e = 0; e < D; ++e) {
              double sum = 0;
              for (int64_t j = 0; j < hc; ++j) sum += (*data)[size_t((r * hc + j) * D + e)];
              ASSERT_EQ(want[size_t(r * D + e)], round_bf16(float(sum / double(hc)))) << "row " << r << " dim " << e;
            }
        }
      }
}

TEST(BackendOps, ConcatCols) {
  for (int64_t n : {1, 3, 5}) {
    const std::vector<int64_t> widths = {7, 64, 1, 129};
    std::vector<std::vector<float>> parts;
    int64_t total = 0;
    for (int64_t w : widths) {
      parts.push_back(activations(n * w, uint64_t(w + n)));
      total += w;
    }
    auto run = [&](Backend& be) {
      std::vector<std::vector<float>> in(parts);
      std::vector<Tensor> views;
      for (size_t i = 0; i < in.size(); ++i) views.push_back(tensor(in[i], {n, widths[i]}));
      std::vector<float> y(size_t(n * total));
      Tensor ty = tensor(y, {n, total});
      be.concat_cols(views, ty);
      return y;
    };
    const std::vector<float> want = run(reference());
    for (int64_t r = 0; r < n; ++r) {  // each part where it belongs
      int64_t at = 0;
      for (size_t i = 0; i < widths.size(); ++i)
        for (int64_t k = 0; k < widths[i]; ++k, ++at)
          ASSERT_EQ(want[size_t(r * total + at)], parts[i][size_t(r * widths[i] + k)]);
    }
    for_each_cpu(n, [&](Backend& be) { EXPECT_TRUE(same_bits(want, run(be))) << "n=" << n; });
  }
}

}  // namespace
}  // namespace dsv4::test

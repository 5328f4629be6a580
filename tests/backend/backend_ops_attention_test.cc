// Attention, the compressor and the indexer, CPU backend against the reference backend (see
// backend_ops_test.cc): sparse_attention, compressor_store, compressor_pool, indexer_select.
#include <algorithm>

#include "op_compare.h"

namespace dsv4::test {
namespace {

// Cache rows filled from host values (every backend keeps tables in host memory: one table
// serves all of them; its blocks come from the reference backend).
struct Table {
  Table(DType dtype, int64_t width, const std::vector<float>& rows)
      : pool(reference(), dtype, width, 16), table(&pool) {
    const int64_t n = int64_t(rows.size()) / width;
    table.ensure_rows(n);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t k = 0; k < width; ++k) {
        const float v = rows[size_t(r * width + k)];
        if (dtype == DType::F32) reinterpret_cast<float*>(table.row(r))[k] = v;
        else reinterpret_cast<uint16_t*>(table.row(r))[k] = f32_to_bf16(v);
      }
  }
  RowPool pool;
  RowTable table;
};

// Not exact: the CPU backend's scores are FMA chains over 8 lanes (the reference backend: a
// sequential sum), its exponentials a vectorized e^x within 2 ulp of std::exp, and its value sums
// FMA chains. The test follows the errors from the exact values (computed in double):
// - each backend's score s_t lies within e_t = (d + 2)·u·scale·Σ|q·kv_t| of the exact one, so its
//   e^(s_t − max) lies within a relative ε_t = e_t + max_t e_t + 4u of the exact p_t (the max moves
//   too; 2 ulp of e^x, one rounding of the difference);
// - the probabilities rounded to bf16 then agree unless p_t(1 ± ε_t) holds a rounding boundary, and
//   differ by bf16_spread(p_t, ε_t·p_t) where it does;
// - the value sum Σ_t p̂_t·kv_t (either order within (|S| + 1)·u·Σ p̂|kv| of exact) and the
//   denominator Z (relative ε_Z = max ε_t + (|S| + 1)u) give the unrounded output within
//   err = (Σ_t Δp̂_t|kv_t| + (|S| + 1)·u·Σ_t p̂_t|kv_t|)/Z + |o|·(ε_Z + 2u) of the exact o,
// - and its bf16 rounding agrees unless o ± err holds a boundary: |Δo| ≤ bf16_spread(o, err).
TEST(BackendOps, SparseAttention) {
  const int64_t positions_cached = 70, entries_cached = 17;
  const std::vector<int64_t> positions = {0, 5, 40, 69};
  const int64_t n = int64_t(positions.size());
  for (DType dtype : {DType::BF16, DType::F32})
    for (int64_t d : {8, 64, 136})
      for (int64_t H : {1, 3, 4}) {
        const Table kv(dtype, d, normal_bf16(positions_cached * d, uint64_t(d + H)));
        const Table entries(dtype, d, normal_bf16(entries_cached * d, uint64_t(d * H)));
        const std::vector<float> q = normal_bf16(n * H * d, uint64_t(d + 3 * H), 2.0f);
        const TestWeight sink = weight_of(normal_bf16(H, uint64_t(H), 2.0f), WeightFormat::F32);
        // Indexer selections: unsorted, with repeats of −1 (fewer entries than top-k).
        std::vector<int32_t> selected = {-1, -1, -1, -1, -1, -1,  3, 0, -1, -1, -1, -1,
                                         9, 2, 7, 0, 5, -1,       16, 1, 12, 4, 8, 11};
        for (int mode = 0; mode < 3; ++mode)  // window only, window + all entries, window + selection
          for (int64_t window : {1, 16, 128}) {
            SCOPED_TRACE(std::string(dtype_name(dtype)) + " d=" + std::to_string(d) + " H=" + std::to_string(H) +
                         " mode=" + std::to_string(mode) + " window=" + std::to_string(window));
            std::vector<AttentionRow> rows(static_cast<size_t>(n));
            for (int64_t r = 0; r < n; ++r) {
              AttentionRow& row = rows[size_t(r)];
              row.kv = &kv.table;
              row.position = positions[size_t(r)];
              row.window = window;
              if (mode > 0) {
                row.entries = &entries.table;
                row.num_entries = std::min(entries_cached, (row.position + 1) / 4);
              }
            }
            Tensor tsel = tensor(selected, {n, 6});
            const float scale = float(1.0 / std::sqrt(double(d)));
            auto run = [&](Backend& be) {
              std::vector<float> qin(q), o(size_t(n * H * d), NAN);
              Tensor to = tensor(o, {n, H, d});
              be.sparse_attention(tensor(qin, {n, H, d}), rows, mode == 2 ? &tsel : nullptr, sink.view, scale, to);
              return o;
            };
            const std::vector<float> want = run(reference());
            std::vector<double> bound(want.size());
            for (int64_t r = 0; r < n; ++r) {
              // The row's KV set: window rows, then entries in ascending order.
              std::vector<const uint8_t*> set;
              const AttentionRow& row = rows[size_t(r)];
              for (int64_t p = std::max<int64_t>(0, row.position - window + 1); p <= row.position; ++p)
                set.push_back(kv.table.row(p));
              std::vector<int64_t> ids;
              if (mode == 1)
                for (int64_t e = 0; e < row.num_entries; ++e) ids.push_back(e);
              if (mode == 2)
                for (int64_t j = 0; j < 6; ++j)
                  if (selected[size_t(r * 6 + j)] >= 0) ids.push_back(selected[size_t(r * 6 + j)]);
              std::sort(ids.begin(), ids.end());
              for (int64_t e : ids) set.push_back(entries.table.row(e));
              const int64_t total = int64_t(set.size());
              auto value = [&](int64_t t, int64_t k) {
                return dtype == DType::F32 ? double(reinterpret_cast<const float*>(set[size_t(t)])[k])
                                           : double(bf16_to_f32(reinterpret_cast<const uint16_t*>(set[size_t(t)])[k]));
              };
              for (int64_t h = 0; h < H; ++h) {
                const float* qh = q.data() + (r * H + h) * d;
                std::vector<double> s(static_cast<size_t>(total)), e(s.size()), p(s.size()), rounded(s.size()),
                    dp(s.size());
                double mx = -INFINITY, max_e = 0;
                for (int64_t t = 0; t < total; ++t) {
                  double dot = 0, mass = 0;
                  for (int64_t k = 0; k < d; ++k) {
                    dot += qh[k] * value(t, k);
                    mass += std::fabs(qh[k] * value(t, k));
                  }
                  s[size_t(t)] = dot * scale;
                  e[size_t(t)] = double(d + 2) * kU * scale * mass;
                  mx = std::max(mx, s[size_t(t)]);
                  max_e = std::max(max_e, e[size_t(t)]);
                }
                double Z = std::exp(double(weight_value(sink.view, 0, h)) - mx), max_eps = 0;
                for (int64_t t = 0; t < total; ++t) {
                  const double eps = e[size_t(t)] + max_e + 4 * kU;
                  max_eps = std::max(max_eps, eps);
                  p[size_t(t)] = std::exp(s[size_t(t)] - mx);
                  rounded[size_t(t)] = round_bf16(float(p[size_t(t)]));
                  dp[size_t(t)] = bf16_spread(p[size_t(t)], eps * p[size_t(t)]);
                  Z += p[size_t(t)];
                }
                const double eps_z = max_eps + double(total + 1) * kU;
                for (int64_t k = 0; k < d; ++k) {
                  double o = 0, moved = 0, mass = 0;
                  for (int64_t t = 0; t < total; ++t) {
                    o += rounded[size_t(t)] * value(t, k);
                    moved += dp[size_t(t)] * std::fabs(value(t, k));
                    mass += rounded[size_t(t)] * std::fabs(value(t, k));
                  }
                  o /= Z;
                  const double err = (moved + double(total + 1) * kU * mass) / Z + std::fabs(o) * (eps_z + 2 * kU);
                  bound[size_t((r * H + h) * d + k)] = bf16_spread(o, err);
                }
              }
            }
            for_each_cpu(n, [&](Backend& be) { EXPECT_TRUE(within(want, run(be), bound)); });
          }
      }
}

TEST(BackendOps, CompressorStore) {
  for (int64_t P : {3, 64})
    for (int64_t ratio : {4, 128}) {
      const TestWeight ape = weight_of(normal_bf16(ratio * P, uint64_t(P + ratio)), WeightFormat::F32, ratio);
      const std::vector<int64_t> positions = {0, 3, 4, 130, 255};
      const int64_t n = int64_t(positions.size());
      const std::vector<float> kv = activations(n * P, uint64_t(P)), score = activations(n * P, uint64_t(P + 1));
      auto run = [&](Backend& be) {
        RowPool pool(be, DType::F32, 2 * P, 8);
        RowTable a(&pool), b(&pool);
        std::vector<RowTable*> states = {&a, &b, &a, &b, &a};  // rows of two sequences
        a.ensure_rows(256);  // (the caller reserves the rows)
        b.ensure_rows(256);
        std::vector<float> kin(kv), sin(score);
        be.compressor_store(tensor(kin, {n, P}), tensor(sin, {n, P}), ape.view, positions, states);
        std::vector<float> out;
        for (int64_t r = 0; r < n; ++r) {
          const float* row = reinterpret_cast<const float*>(states[size_t(r)]->row(positions[size_t(r)]));
          out.insert(out.end(), row, row + 2 * P);
        }
        return out;
      };
      const std::vector<float> want = run(reference());
      for_each_cpu(n, [&](Backend& be) { EXPECT_TRUE(same_bits(want, run(be))) << "P=" << P << " ratio=" << ratio; });
    }
}

TEST(BackendOps, CompressorPool) {
  struct Case {
    int64_t ratio;
    bool overlap;
  };
  for (const Case& c : {Case{4, true}, Case{4, false}, Case{128, false}})
    for (int64_t width : {3, 64}) {
      const int64_t P = (c.overlap ? 2 : 1) * width, entries = c.ratio == 128 ? 2 : 9;
      std::vector<float> state = activations(entries * c.ratio * 2 * P, uint64_t(width + c.ratio));
      for (size_t i = 0; i < state.size(); i += 7) state[i] *= 30.0f;  // dominant and negligible slots
      const Table states(DType::F32, 2 * P, state);
      std::vector<PoolRequest> requests;
      for (int64_t e : {int64_t(0), int64_t(1), entries - 1, int64_t(0)}) requests.push_back({&states.table, e});
      const int64_t m = int64_t(requests.size());
      auto run = [&](Backend& be) {
        std::vector<float> pooled(size_t(m * width), NAN);
        Tensor tp = tensor(pooled, {m, width});
        be.compressor_pool(requests, c.ratio, c.overlap, width, tp);
        return pooled;
      };
      const std::vector<float> want = run(reference());
      for_each_cpu(m, [&](Backend& be) {
        EXPECT_TRUE(same_bits(want, run(be))) << "ratio=" << c.ratio << " overlap=" << c.overlap << " width=" << width;
      });
    }
}

// FP4 fake-quantized values (as the indexer's queries and keys), bf16-exact.
std::vector<float> fp4_values(int64_t rows, int64_t dim, uint64_t seed) {
  std::vector<float> v = normal_bf16(rows * dim, seed);
  for (int64_t r = 0; r < rows; ++r) fake_quant_fp4(v.data() + r * dim, dim, kFp4Block);
  return v;
}

// The selection with 0 visible entries, fewer than top-k and more; scores with repeated keys and
// many zero ReLUs, so that ties are frequent (ties go to the lower entry index). Row 1's query is not
// FP4-valued: on AMX it takes the reference steps instead of the tile kernel.
TEST(BackendOps, IndexerSelect) {
  const int64_t T = 300;
  for (int64_t ih : {3, 16})
    for (int64_t id : {8, 64, 128}) {
      std::vector<float> keys = fp4_values(T, id, uint64_t(ih + id));
      for (int64_t t : {7, 100, 299}) std::copy_n(keys.begin() + 3 * id, id, keys.begin() + t * id);  // ties
      const Table table(DType::BF16, id, keys);
      const std::vector<IndexerRow> rows = {{&table.table, T}, {&table.table, T}, {&table.table, 5}, {&table.table, 0},
                                            {&table.table, 150}};
      const int64_t n = int64_t(rows.size());
      std::vector<float> q = fp4_values(n * ih, id, uint64_t(id));
      const std::vector<float> general = normal_bf16(ih * id, 77);
      std::copy(general.begin(), general.end(), q.begin() + ih * id);
      std::vector<float> w = normal_bf16(n * ih, uint64_t(ih), 0.3f);
      for (int64_t top_k : {1, 8, 64})
        for (bool with_scores : {true, false}) {
          auto run = [&](Backend& be) {
            std::vector<float> qin(q), win(w), scores(size_t(n * (T + 3)), NAN);
            std::vector<int32_t> sel(size_t(n * top_k), -7);
            Tensor ts = tensor(scores, {n, T + 3}), tsel = tensor(sel, {n, top_k});
            be.indexer_select(tensor(qin, {n, ih, id}), tensor(win, {n, ih}), rows, top_k, tsel,
                              with_scores ? &ts : nullptr);
            std::vector<float> out(with_scores ? scores : std::vector<float>());
            for (int32_t s : sel) out.push_back(float(s));
            return out;
          };
          const std::vector<float> want = run(reference());
          const float* sel = want.data() + (with_scores ? n * (T + 3) : 0);
          for (int64_t j = 0; j < top_k; ++j) {  // the shorter rows are padded
            ASSERT_EQ(sel[3 * top_k + j], -1.0f) << "no visible entry, slot " << j;
            if (j >= 5) {
              ASSERT_EQ(sel[2 * top_k + j], -1.0f) << "5 visible entries, slot " << j;
            }
          }
          for_each_cpu(n, [&](Backend& be) {
            EXPECT_TRUE(same_bits(want, run(be))) << "ih=" << ih << " id=" << id << " top_k=" << top_k
                                                  << " scores=" << with_scores;
          });
        }
    }
}

}  // namespace
}  // namespace dsv4::test

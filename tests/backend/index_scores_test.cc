// The indexer's scores: the tile-unit kernel (index_scores_amx) gives the bits of the reference
// steps (index_scores) wherever its exactness check lets it run, and falls back where it does not;
// the backend's selection is the same on every instruction set.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/index_scores.h"
#include "cache/row_pool.h"
#include "core/cpu_features.h"
#include "core/number_formats.h"
#include "support/cpu_isas.h"

namespace dsv4::cpu {
namespace {

constexpr int64_t kHeads = 64, kDim = 128;

// FP4 fake-quantized rows as the indexer makes them; block b of a row scaled by 2^spread[b].
std::vector<float> fp4_rows(int64_t rows, int64_t dim, std::mt19937_64& rng, int max_spread) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(size_t(rows * dim));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < dim; b += 32) {
      const float s = std::ldexp(1.0f, max_spread ? int(rng() % uint64_t(max_spread + 1)) : 0);
      for (int64_t k = b; k < b + 32; ++k) v[size_t(r * dim + k)] = normal(rng) * s;
    }
    fake_quant_fp4(v.data() + r * dim, dim, kFp4Block);
  }
  return v;
}

struct Keys {
  explicit Keys(CpuBackend& be, const std::vector<float>& f32)
      : pool(be, DType::BF16, kDim), table(&pool), values(f32) {
    const int64_t n = int64_t(f32.size()) / kDim;
    table.ensure_rows(n);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t k = 0; k < kDim; ++k)
        reinterpret_cast<uint16_t*>(table.row(t))[k] = f32_to_bf16(f32[size_t(t * kDim + k)]);
  }
  RowPool pool;
  RowTable table;
  std::vector<float> values;  // the same keys in f32 (exact: FP4 values are bf16 values)
};

TEST(IndexScores, ExactnessCheckFollowsTheBound) {
  // dim 128: log2(128) + hi + 2 − lo ≤ 24, lo ≥ −126, hi + 2 + 7 ≤ 127.
  EXPECT_TRUE(dot_is_exact(5, -10, 128));    // 7 + 5 + 2 + 10 = 24
  EXPECT_FALSE(dot_is_exact(5, -11, 128));   // 25
  EXPECT_TRUE(dot_is_exact(5, -11, 64));     // one bit more room
  EXPECT_TRUE(dot_is_exact(-111, -126, 128));
  EXPECT_FALSE(dot_is_exact(-112, -127, 128));  // subnormal partial sums
  EXPECT_TRUE(dot_is_exact(118, 110, 128));
  EXPECT_FALSE(dot_is_exact(119, 110, 128));    // may overflow
  EXPECT_TRUE(dot_is_exact(2 * kEmptyHi, 2 * kEmptyLo, 128));        // no nonzero product
  EXPECT_TRUE(dot_is_exact(kEmptyHi + 3, kEmptyLo - 1, 128));
}

// The tile kernel gives the reference steps' bits: on FP4 data where the check clears it, and
// where it does not (blocks 2^20 apart) through the reference steps.
TEST(IndexScores, TileKernelEqualsReferenceSteps) {
  if (!cpu_features().has(CpuIsa::Amx)) GTEST_SKIP() << "no AMX on this machine";
  std::mt19937_64 rng(5);
  CpuBackend be(1);
  const int64_t n = 1000;  // not a multiple of 16
  std::vector<float> keys_f32 = fp4_rows(n, kDim, rng, 2);
  for (int64_t t = 320; t < 336; ++t)
    for (int64_t k = 0; k < 32; ++k) keys_f32[size_t(t * kDim + k)] *= std::ldexp(1.0f, 20);
  Keys keys(be, keys_f32);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> w(kHeads);
  for (auto& x : w) x = uni(rng);
  const std::vector<float> q = fp4_rows(kHeads, kDim, rng, 3);
  std::vector<float> want(static_cast<size_t>(n));
  index_scores(q.data(), w.data(), kHeads, kDim, keys.values.data(), 0, n, want.data());
  EXPECT_GT(std::count_if(want.begin(), want.end(), [](float s) { return s > 0; }), n / 4);
  IndexQuery iq;
  prepare_index_query(q.data(), w.data(), kHeads, kDim, iq);
  ASSERT_TRUE(iq.narrow);
  std::vector<float> got(want.size(), NAN), split(want.size(), NAN);
  const int64_t rejected = index_scores_amx(iq, keys.table, 0, n, got.data());
  // The wide entries go by the reference steps for every head; most others not.
  EXPECT_GE(rejected, 16 * kHeads);
  EXPECT_LT(rejected, 16 * kHeads + n * kHeads / 4);
  ASSERT_EQ(std::memcmp(want.data(), got.data(), size_t(n) * 4), 0);
  index_scores_amx(iq, keys.table, 0, 512, split.data());
  index_scores_amx(iq, keys.table, 512, n, split.data());
  ASSERT_EQ(std::memcmp(want.data(), split.data(), size_t(n) * 4), 0);
  std::vector<float> wide = q;
  wide[7] = 0.3f;  // three significant bits and more: the backend keeps such a query off the tile kernel
  prepare_index_query(wide.data(), w.data(), kHeads, kDim, iq);
  EXPECT_FALSE(iq.narrow);
}

// The backend's selection (scores and top-k) is the same with and without the tile unit.
TEST(IndexScores, SelectionIsTheSameOnEveryInstructionSet) {
  std::mt19937_64 rng(9);
  const int64_t n = 777, rows = 4, top_k = 64;
  const std::vector<float> keys_f32 = fp4_rows(n, kDim, rng, 2);
  std::vector<float> q = fp4_rows(rows * kHeads, kDim, rng, 2), w(size_t(rows * kHeads));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (auto& x : w) x = uni(rng);
  std::vector<std::vector<float>> scores;
  std::vector<std::vector<int32_t>> picks;
  const std::vector<CpuIsa> isas = test::simd_isas();
  for (CpuIsa isa : isas) {
    CpuBackend be(2, isa);
    Keys keys(be, keys_f32);
    std::vector<IndexerRow> ir = {{&keys.table, n}, {&keys.table, 500}, {&keys.table, 17}, {&keys.table, 0}};
    std::vector<float> s(size_t(rows * n));
    std::vector<int32_t> sel(size_t(rows * top_k));
    Tensor tq(q.data(), DType::F32, {rows, kHeads, kDim}), tw(w.data(), DType::F32, {rows, kHeads});
    Tensor ts(s.data(), DType::F32, {rows, n}), tsel(sel.data(), DType::I32, {rows, top_k});
    be.indexer_select(tq, tw, ir, top_k, tsel, &ts);
    scores.push_back(s);
    picks.push_back(sel);
  }
  for (size_t i = 1; i < isas.size(); ++i) {
    EXPECT_EQ(std::memcmp(scores[0].data(), scores[i].data(), scores[0].size() * 4), 0) << isa_name(isas[i]);
    EXPECT_EQ(picks[0], picks[i]) << isa_name(isas[i]);
  }
  EXPECT_EQ(picks[0][size_t(2 * top_k + 17)], -1);  // 17 visible entries: the rest of the row is empty
  EXPECT_EQ(picks[0][size_t(3 * top_k)], -1);       // none visible (a position before the first entry)
}

}  // namespace
}  // namespace dsv4::cpu

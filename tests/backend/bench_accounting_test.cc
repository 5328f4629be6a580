// The benchmark's bookkeeping, checked against independent figures: the weight bytes a decode
// step must read (from the model's typed views) against the byte sizes the checkpoint's
// safetensors headers give for the same tensors, and the speedup model against the formula
// evaluated by hand.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "dsv4_bench/arithmetic_rate.h"
#include "dsv4_bench/speedup_model.h"
#include "dsv4_bench/weight_bytes.h"
#include "model/model_files.h"

namespace dsv4 {
namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// Bytes of every tensor under `prefix` in the file, except the routed experts and tid2eid.
int64_t file_dense_bytes(const TensorStore& store, const std::string& prefix) {
  int64_t n = 0;
  for (const TensorInfo* t : store.all())
    if (starts_with(t->name, prefix) && !starts_with(t->name, prefix + "ffn.experts.") &&
        t->name != prefix + "ffn.gate.tid2eid")
      n += int64_t(t->nbytes);
  return n;
}

int64_t file_expert_bytes(const TensorStore& store, const std::string& prefix, int64_t e) {
  int64_t n = 0;
  const std::string p = prefix + "ffn.experts." + std::to_string(e) + ".";
  for (const TensorInfo* t : store.all())
    if (starts_with(t->name, p)) n += int64_t(t->nbytes);
  return n;
}

TEST(BenchAccounting, WeightBytesMatchTheCheckpointFile) {
  auto files = ModelFiles::open(std::string(DSV4_TEST_DATA) + "/tiny-a");
  const ModelConfig& c = files->config;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const BlockWeights& b = files->weights.layers[size_t(l)];
    const std::string prefix = "layers." + std::to_string(l) + ".";
    // A hash-routed layer reads one token's row of tid2eid (top-k int64 ids).
    const int64_t tid2eid_row = b.ffn.tid2eid.present() ? c.num_experts_per_tok * 8 : 0;
    EXPECT_EQ(bench::block_dense_bytes(b), file_dense_bytes(files->store, prefix) + tid2eid_row);
    const std::set<int64_t> chosen = {0, 3, c.n_routed_experts - 1};
    int64_t expected = 0;
    for (int64_t e : chosen) expected += file_expert_bytes(files->store, prefix, e);
    EXPECT_EQ(bench::experts_bytes(b.ffn, chosen), expected);
  }
  ASSERT_TRUE(files->has_mtp());
  EXPECT_EQ(bench::block_dense_bytes(files->weights.mtp[0].block),
            file_dense_bytes(files->store, "mtp.0.") -
                [&] {  // the MTP module's own tensors around its block
                  int64_t n = 0;
                  for (const char* s : {"enorm.", "hnorm.", "e_proj.", "h_proj.", "norm.", "hc_head_"})
                    for (const TensorInfo* t : files->store.all())
                      if (starts_with(t->name, std::string("mtp.0.") + s)) n += int64_t(t->nbytes);
                  return n;
                }());
}

TEST(BenchAccounting, SpeedupModelIsTheFormula) {
  // Two kinds measured (ratio 0 and 4); the pattern also names ratio 128, costed as ratio 0.
  bench::ModelBenchResult r;
  bench::LayerKind w, csa;
  w.ratio = 0, w.layer = 0, w.decode.ms = 2.0, w.extend[2].ms = 3.0, w.extend[3].ms = 3.5;
  csa.ratio = 4, csa.layer = 1, csa.decode.ms = 4.0, csa.extend[2].ms = 5.0, csa.extend[3].ms = 7.0;
  r.kinds = {w, csa};
  r.head[1].ms = 10.0, r.head[2].ms = 11.0, r.head[3].ms = 12.0;
  const auto m = bench::model_speedup(r, {0, 4, 4, 128}, 1.5, {0.5, 1.0}, {1, 2});
  ASSERT_EQ(m.notes.size(), 1u);  // ratio 128 absent
  // T_decode = head + 2 × window-costed layers + 2 × csa = 10 + 2·2 + 2·4 = 22.
  EXPECT_DOUBLE_EQ(m.decode_ms, 22.0);
  EXPECT_DOUBLE_EQ(m.verify_ms.at(2), 11.0 + 2 * 3.0 + 2 * 5.0);  // 27
  EXPECT_DOUBLE_EQ(m.verify_ms.at(3), 12.0 + 2 * 3.5 + 2 * 7.0);  // 33
  ASSERT_EQ(m.points.size(), 4u);
  for (const auto& p : m.points) {
    double e = 0, step = 0;
    if (p.alpha == 0.5 && p.k == 1) e = 1.5, step = 27 + 1.5;
    if (p.alpha == 0.5 && p.k == 2) e = 1.75, step = 33 + 3.0;
    if (p.alpha == 1.0 && p.k == 1) e = 2.0, step = 27 + 1.5;
    if (p.alpha == 1.0 && p.k == 2) e = 3.0, step = 33 + 3.0;
    EXPECT_DOUBLE_EQ(p.tokens_per_step, e);
    EXPECT_DOUBLE_EQ(p.step_ms, step);
    EXPECT_NEAR(p.speedup, e * 22.0 / step, 1e-12);
  }
}

TEST(BenchAccounting, ArithmeticTimeIsBytesOverEachFormatsRate) {
  bench::ArithmeticRates rates;
  rates.gbs[WeightFormat::FP8] = 10.0;
  rates.gbs[WeightFormat::FP4] = 5.0;
  bench::FormatBytes bytes = {{WeightFormat::FP8, 20'000'000}, {WeightFormat::FP4, 5'000'000},
                              {WeightFormat::I64, 48}};  // no rate: not counted
  EXPECT_DOUBLE_EQ(bench::arithmetic_ms(rates, bytes), 2.0 + 1.0);
  // Measured on the tiny checkpoint's kernels: a rate for every format its products use.
  auto files = ModelFiles::open(std::string(DSV4_TEST_DATA) + "/tiny-a");
  CpuBackend be(2);
  const auto measured = bench::measure_arithmetic_rates(be, files->weights);
  for (WeightFormat f : {WeightFormat::FP8, WeightFormat::FP4, WeightFormat::BF16, WeightFormat::F32}) {
    ASSERT_TRUE(measured.gbs.count(f)) << weight_format_name(f);
    EXPECT_GT(measured.gbs.at(f), 0.0) << weight_format_name(f);
  }
  // The per-format accounting adds up to the total the bench divides by its times.
  const BlockWeights& b = files->weights.layers[1];
  int64_t sum = 0;
  for (auto& [f, n] : bench::block_dense_format_bytes(b)) sum += n;
  EXPECT_EQ(sum, bench::block_dense_bytes(b));
}

TEST(BenchAccounting, SpeedupAtMeasuredAcceptanceCountsTheMtpRecomputation) {
  bench::SpeedupModel m;
  m.decode_ms = 20.0;
  m.draft_ms = 2.0;
  m.verify_ms[3] = 30.0;
  bench::LayerKind block;
  block.layer = -1;
  block.decode.ms = 1.0;
  block.extend[2].ms = 1.5;
  block.extend[4].ms = 2.5;  // 3 rows: interpolated to 2.0
  // P(d1 accepted) = 0.8, P(d1 and d2) = 0.5: P(a=1) = 0.3, P(a=2) = 0.5, P(a=0) = 0.2.
  const auto p = bench::speedup_at_acceptance(m, block, 2, {0.8, 0.5});
  EXPECT_DOUBLE_EQ(p.tokens_per_step, 2.3);
  EXPECT_DOUBLE_EQ(p.recompute_ms, 0.3 * (1.5 - 1.0) + 0.5 * (2.0 - 1.0));  // 0.65
  EXPECT_DOUBLE_EQ(p.step_ms, 30.0 + 2 * 2.0 + 0.65);
  EXPECT_NEAR(p.speedup, 2.3 * 20.0 / 34.65, 1e-12);
  EXPECT_THROW(bench::speedup_at_acceptance(m, block, 2, {0.8}), Error);
  EXPECT_THROW(bench::speedup_at_acceptance(m, block, 4, {0.9, 0.8, 0.7, 0.6}), Error);  // no verify of 5 rows
}

}  // namespace
}  // namespace dsv4

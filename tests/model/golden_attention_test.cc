// Golden component tests of the attention side of a DeepSeek-V4 block: each sub-step of
// the attention, the compressors and the indexer, run alone on the reference's own inputs
// (tests/data/tiny-a/golden_ops.safetensors) and compared with the reference's outputs
// within the per-tensor tolerances of golden_ops.json (metrics as in the data's README).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "support/golden_support.h"

namespace dsv4 {
namespace {

using test::golden;
using test::GoldenPass;
using test::GoldenPhase;
using test::iota;
using test::layer_phase_name;
using test::LayerPhase;

// Parameter: (layer, phase name).

class GoldenAttention : public ::testing::TestWithParam<LayerPhase> {
 protected:
  static void SetUpTestSuite() { golden(); }  // opens the checkpoint and the golden files once

  int64_t layer() const { return std::get<0>(GetParam()); }
  GoldenPhase phase() const {
    return std::get<1>(GetParam()) == "decode" ? test::decode_phase() : test::prefill_phase();
  }
  std::string scope() const { return test::layer_scope(layer()); }
  std::string prefix() const { return scope() + "." + phase().name + "."; }  // "L1.prefill."
  const Block& block() const { return golden().model().blocks().at(size_t(layer())); }
  const Attention& attention() const { return block().attention(); }
  int64_t window() const { return golden().config().sliding_window; }
};

// Host rows [begin, end) of a row-major [rows, cols] vector.
std::vector<float> rows_of(const std::vector<float>& v, int64_t cols, int64_t begin, int64_t end) {
  return std::vector<float>(v.begin() + begin * cols, v.begin() + end * cols);
}

// Stores host rows into a cache table at the given row indices (positions or entries).
void store(GoldenPass& gp, RowTable& table, const std::vector<float>& rows, int64_t cols,
           const std::vector<int64_t>& at) {
  Tensor t = gp.load(rows, {int64_t(at.size()), cols});
  store_table_rows(gp.be(), table, at, t);
}

// ---- attention projections: qr, q, kv_normed, kv

TEST_P(GoldenAttention, QueryAndKeyValueProjections) {
  GoldenPass gp(phase());
  Pass& p = gp.pass();
  const Attention& a = attention();
  Tensor x = gp.load(prefix() + "attn_in");

  Tensor qr = a.low_rank_query(p, x);
  EXPECT_TRUE(test::check_tensor(prefix() + "qr", gp.host(qr), "", "from golden attn_in"));

  Tensor q = a.query(p, gp.load(prefix() + "qr"));
  EXPECT_TRUE(test::check_tensor(prefix() + "q", gp.host(q), "", "from golden qr"));

  Tensor normed;
  Tensor kv = a.key_value(p, x, &normed);
  EXPECT_TRUE(test::check_tensor(prefix() + "kv_normed", gp.host(normed), "", "from golden attn_in"));
  EXPECT_TRUE(test::check_tensor(prefix() + "kv", gp.host(kv), "", "from golden attn_in"));
}

// ---- sparse attention over a cache filled from golden data, and the output projection

TEST_P(GoldenAttention, SparseAttentionAndOutputProjection) {
  const GoldenPhase ph = phase();
  GoldenPass gp(ph);
  Pass& p = gp.pass();
  const Attention& a = attention();
  LayerCache& cache = gp.cache(size_t(layer()));
  const int64_t d = golden().config().head_dim, ratio = block().weights().compress_ratio;

  if (!ph.decode()) {
    // The call's own kv rows at positions 0..P-1, and the compressed entries it emitted.
    store(gp, cache.kv, golden().f32(prefix() + "kv"), d, iota(0, ph.rows));
    if (golden().has(prefix() + "compressed_kv")) {
      const std::vector<float> entries = golden().f32(prefix() + "compressed_kv");
      store(gp, cache.entries, entries, d, iota(0, int64_t(entries.size()) / d));
    }
  } else {
    // The reference's kv buffer: rows [0, window) = ring (row = position mod window),
    // rows window + j = compressed entry j.
    const std::vector<float> buffer = golden().f32(prefix() + "attn_kv");
    const int64_t pos = ph.first;
    std::vector<float> ring;
    std::vector<int64_t> positions;
    for (int64_t t = std::max<int64_t>(0, pos - window() + 1); t <= pos; ++t) {
      const std::vector<float> r = rows_of(buffer, d, t % window(), t % window() + 1);
      ring.insert(ring.end(), r.begin(), r.end());
      positions.push_back(t);
    }
    store(gp, cache.kv, ring, d, positions);
    if (ratio > 0) {
      const int64_t visible = (pos + 1) / ratio;
      ASSERT_LE(window() + visible, int64_t(buffer.size()) / d) << prefix() << "attn_kv has too few rows";
      if (visible > 0) store(gp, cache.entries, rows_of(buffer, d, window(), window() + visible), d, iota(0, visible));
    }
  }

  // CSA layers attend to the indexer's choice: the golden top-k minus its offset into the
  // reference's kv list (prefill: the call's token count; decode: the window). The window
  // rows the engine derives itself.
  Tensor selected;
  if (a.indexer()) {
    const int64_t offset = ph.decode() ? window() : ph.rows;
    std::vector<int64_t> topk = golden().i64(prefix() + "indexer.topk");
    for (int64_t& e : topk) e = e >= 0 ? e - offset : -1;
    selected = gp.load_i32(topk, golden().info(prefix() + "indexer.topk").shape);
  }
  Tensor o = a.attend(p, gp.load(prefix() + "q"), a.indexer() ? &selected : nullptr, size_t(layer()));
  EXPECT_TRUE(test::check_tensor(prefix() + "attn_o", gp.host(o), "", "from golden q and cache"));

  Tensor golden_o = gp.load(prefix() + "attn_o");
  Tensor out = a.project_out(p, golden_o);
  EXPECT_TRUE(test::check_tensor(prefix() + "attn_out", gp.host(out), "", "from golden attn_o"));
}

INSTANTIATE_TEST_SUITE_P(AllLayers, GoldenAttention,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(std::string("prefill"), std::string("decode"))),
                         layer_phase_name);

// ---- the indexer (ratio-4 layers): query, head weights, scores and top-k

class GoldenIndexer : public GoldenAttention {};

// Rows the reference decided by an exact tie at the k-th score: golden_ops.json
// indexer_tie_rows and golden.json decisions.indexer.tie_positions within this call.
int64_t tie_rows(const std::string& tensor, int64_t layer, const GoldenPhase& ph) {
  int64_t n = 0;
  const auto& listed = golden().meta().at("indexer_tie_rows");
  if (listed.contains(tensor)) n = listed.at(tensor).get<int64_t>();
  int64_t in_call = 0;
  for (const auto& tp : golden().summary().at("decisions").at("indexer").at("tie_positions")) {
    const int64_t pos = tp.at(1).get<int64_t>();
    in_call += tp.at(0).get<std::string>() == "layers." + std::to_string(layer) && pos >= ph.first &&
               pos < ph.first + ph.rows;
  }
  return std::max(n, in_call);
}

TEST_P(GoldenIndexer, QueryWeightsScoresAndTopK) {
  const GoldenPhase ph = phase();
  GoldenPass gp(ph);
  Pass& p = gp.pass();
  ASSERT_TRUE(attention().indexer().has_value()) << scope() << " has no indexer";
  const Indexer& ix = *attention().indexer();

  Tensor q = ix.query(p, gp.load(prefix() + "qr"));
  EXPECT_TRUE(test::check_tensor(prefix() + "indexer.q", gp.host(q), "", "from golden qr"));
  Tensor w = ix.head_weights(p, gp.load(prefix() + "attn_in"));
  EXPECT_TRUE(test::check_tensor(prefix() + "indexer.weights", gp.host(w), "", "from golden attn_in"));

  // Keys: the indexer entries of the prefill (the decode position 42 completes no block).
  const std::string keys_name = scope() + ".prefill.indexer.compressed_kv";
  const std::vector<float> keys = golden().f32(keys_name);
  const int64_t id = golden().config().index_head_dim;
  store(gp, gp.cache(size_t(layer())).index_keys, keys, id, iota(0, int64_t(keys.size()) / id));

  Tensor selected = ix.top_k(p, gp.load(prefix() + "indexer.q"), gp.load(prefix() + "indexer.weights"),
                             size_t(layer()), scope());
  const std::string scores_name = prefix() + "indexer.scores";
  const std::vector<float> scores = gp.traced(scores_name);
  const int64_t score_cols = golden().info(scores_name).shape.at(1);
  ASSERT_EQ(scores.size(), golden().f32(scores_name).size())
      << scores_name << ": engine scores " << scores.size() << " values vs golden "
      << golden().info(scores_name).shape_string();
  const test::ScoresComparison sc = test::compare_scores(scores, golden().f32(scores_name), score_cols);
  EXPECT_EQ(sc.inf_mismatches, 0) << scores_name << ": " << sc.inf_mismatches
                                  << " entries are -inf (masked) in only one of engine and golden";
  EXPECT_TRUE(test::check_errors(scores_name, sc.errors, test::tolerance(scores_name),
                                 "from golden indexer.q / weights / keys"));

  const std::string topk_name = prefix() + "indexer.topk";
  const int64_t offset = ph.decode() ? window() : ph.rows;
  const int64_t k = golden().info(topk_name).shape.at(1);
  const int64_t differ = test::index_rows_differ(gp.host_i64(selected), golden().i64(topk_name), k, offset);
  const int64_t allowed = std::max(test::tolerance(topk_name).rows_differ, tie_rows(topk_name, layer(), ph));
  EXPECT_TRUE(test::check_rows_differ(topk_name, differ, ph.rows, allowed));
}

INSTANTIATE_TEST_SUITE_P(RatioFourLayers, GoldenIndexer,
                         ::testing::Combine(::testing::Values(1, 3),
                                            ::testing::Values(std::string("prefill"), std::string("decode"))),
                         layer_phase_name);

// ---- the compressors (attention and indexer kinds)

class GoldenCompressor : public GoldenAttention {
 protected:
  // The layer's compressors with their golden name prefixes ("" / "indexer.").
  std::vector<std::pair<const Compressor*, std::string>> compressors() const {
    std::vector<std::pair<const Compressor*, std::string>> c;
    if (attention().compressor()) c.emplace_back(&*attention().compressor(), "");
    if (attention().indexer()) c.emplace_back(&attention().indexer()->compressor(), "indexer.");
    return c;
  }
  // Every instantiated layer compresses (by the config, not the built model): the attention
  // compressor, plus the indexer's on the ratio-4 layers; asserted so that a layer built without
  // them cannot pass with no check.
  size_t expected_compressors() const { return golden().config().compress_ratio(layer()) == 4 ? 2 : 1; }
};

// The prefill call on golden attn_in: the pooled entries, and the finished entries (norm,
// RoPE, FP8 or Hadamard + FP4) from the golden pooled values.
TEST_P(GoldenCompressor, PrefillPoolingAndFinishing) {
  const GoldenPhase ph = test::prefill_phase();
  ASSERT_EQ(compressors().size(), expected_compressors());
  for (const auto& [comp, kind] : compressors()) {
    GoldenPass gp(ph);
    Pass& p = gp.pass();
    const std::string pooled_name = prefix() + kind + "compressed_kv_pooled";
    const std::string entries_name = prefix() + kind + "compressed_kv";
    comp->append(p, gp.load(prefix() + "attn_in"), size_t(layer()), scope());
    if (!golden().has(entries_name)) {  // the ratio-128 layer completes no entry in 42 positions
      EXPECT_EQ(p.tracer->find(entries_name), nullptr) << entries_name << ": the engine emitted entries, the "
                                                       << "reference none";
      continue;
    }
    EXPECT_TRUE(test::check_tensor(pooled_name, gp.traced(pooled_name), "", "from golden attn_in"));

    Tensor pooled = gp.load(pooled_name);
    const int64_t m = pooled.dim(0);
    comp->finish(p, pooled, iota(0, m));
    EXPECT_TRUE(test::check_tensor(entries_name, gp.host(pooled), "", "from golden pooled"));
  }
}

// The compressor tolerance of a trace tensor: the layer's prefill tolerance of the same
// tensor; the ratio-128 layer has none (no prefill entry), so it takes the looser of the
// other layers' attention-compressor tolerances (same norm / RoPE / FP8 finishing).
test::Tolerance trace_tolerance(int64_t layer, const std::string& kind, std::string* name) {
  *name = "L" + std::to_string(layer) + ".prefill." + kind + "compressed_kv";
  if (golden().meta().at("tolerance").contains(*name)) return test::tolerance(*name);
  test::Tolerance loosest;
  for (int64_t l = 0; l < golden().config().num_hidden_layers; ++l) {
    const std::string other = "L" + std::to_string(l) + ".prefill." + kind + "compressed_kv";
    if (!golden().meta().at("tolerance").contains(other)) continue;
    const test::Tolerance t = test::tolerance(other);
    loosest.rel_med = std::max(loosest.rel_med, t.rel_med);
    loosest.rel_max = std::max(loosest.rel_max, t.rel_max);
  }
  *name = "loosest compressed_kv tolerance";
  return loosest;
}

// The whole sequence: trace attn_in fed as the prefill (0..P-1), then one position per
// call; every emitted entry, in order, against the reference's (decode-time emission).
TEST_P(GoldenCompressor, WholeSequenceStepByStep) {
  const std::vector<float> x = golden().f32("trace." + scope() + ".attn_in");
  const int64_t D = golden().config().hidden_size, T = int64_t(x.size()) / D, P = golden().prompt_len();
  ASSERT_EQ(compressors().size(), expected_compressors());
  for (const auto& [comp, kind] : compressors()) {
    const std::string name = scope() + "." + kind + "compressed_kv";
    const int64_t w = comp->width();
    std::vector<float> emitted;
    GoldenPass gp(iota(0, P), "prefill");
    for (int64_t start = 0; start < T;) {
      const int64_t n = start == 0 ? P : 1;
      if (start > 0) gp.next_call(iota(start, n), "decode");
      comp->append(gp.pass(), gp.load(rows_of(x, D, start, start + n), {n, D}), size_t(layer()), scope());
      const std::string traced = scope() + "." + gp.pass().phase + "." + kind + "compressed_kv";
      const int64_t expected = (start + n) / comp->ratio() - start / comp->ratio();
      if (const Tracer::Entry* e = gp.tracer().find(traced)) {
        ASSERT_EQ(int64_t(e->f32.size()), expected * w) << name << ": call at position " << start << " emitted "
                                                        << e->f32.size() / size_t(w) << " entries, expected "
                                                        << expected;
        emitted.insert(emitted.end(), e->f32.begin(), e->f32.end());
      } else {
        ASSERT_EQ(expected, 0) << name << ": call at position " << start << " emitted no entry";
      }
      start += n;
    }
    const std::string golden_name = "trace." + name;
    const std::vector<float> g = golden().f32(golden_name);
    ASSERT_EQ(emitted.size(), g.size()) << golden_name << ": " << emitted.size() / size_t(w)
                                        << " entries emitted, the reference " << g.size() / size_t(w);
    std::string tol_name;
    const test::Tolerance tol = trace_tolerance(layer(), kind, &tol_name);
    EXPECT_TRUE(test::check_errors(golden_name, test::row_rel_l2(emitted, g, w), tol,
                                   "trace attn_in, prefill then 1 position per call; tolerance of " + tol_name));
  }
}

INSTANTIATE_TEST_SUITE_P(CompressedLayers, GoldenCompressor,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Values(std::string("prefill"))),
                         layer_phase_name);

}  // namespace
}  // namespace dsv4

// The checkpoint generator as a library: presets and config changes, the generation plan,
// determinism across thread counts, and the aligned construction.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "checkpoint/aligned_weights.h"
#include "checkpoint/make_checkpoint.h"
#include "checkpoint/presets.h"
#include "checkpoint/weight_jobs.h"
#include "core/error.h"
#include "core/number_formats.h"
#include "io/safetensors.h"
#include "model/weights.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Presets, TinyIsTheGoldenTinyAConfig) {
  const ModelConfig golden = load_config(test::tiny_a_dir() / "config.json");
  EXPECT_EQ(build_config(find_preset("tiny"), {}).to_json(), golden.to_json());
  EXPECT_EQ(build_config(find_preset("aligned"), {}).to_json(), golden.to_json());
}

TEST(Presets, V4FlashDimensions) {
  const ModelConfig full = v4_flash_config();
  EXPECT_EQ(full.compress_ratios.size(), 44u);
  EXPECT_EQ(full.num_hidden_layers, 43);
  const ModelConfig two = build_config(find_preset("v4-flash"), {});
  EXPECT_EQ(two.num_hidden_layers, 2);
  EXPECT_EQ(two.compress_ratios, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(two.num_hash_layers, 2);
  ConfigChanges five;
  five.layers = 5;
  const ModelConfig c5 = build_config(find_preset("v4-flash"), five);
  EXPECT_EQ(c5.compress_ratios, (std::vector<int64_t>{0, 0, 4, 128, 4, 0}));
  EXPECT_EQ(c5.num_hash_layers, 3);
  EXPECT_EQ(c5.hidden_size, 4096);
  EXPECT_EQ(c5.n_routed_experts, 256);
}

TEST(Presets, LayersRatiosAndSet) {
  const Preset& tiny = find_preset("tiny");
  ConfigChanges c;
  c.layers = 6;  // longer than the pattern: it repeats
  EXPECT_EQ(build_config(tiny, c).compress_ratios, (std::vector<int64_t>{0, 4, 128, 4, 0, 4, 0}));
  c = {};
  c.ratios = parse_ratio_list("4,0,128,128");
  ModelConfig r = build_config(tiny, c);
  EXPECT_EQ(r.num_hidden_layers, 4);
  EXPECT_EQ(r.compress_ratios, (std::vector<int64_t>{4, 0, 128, 128, 0}));
  c = {};
  for (const char* s : {"sliding_window=8", "num_attention_heads=8", "n_routed_experts=16", "vocab_size=512",
                        "scoring_func=sigmoid", "rope_scaling.factor=8"})
    c.set.push_back(parse_set_option(s));
  r = build_config(tiny, c);
  EXPECT_EQ(r.sliding_window, 8);
  EXPECT_EQ(r.num_attention_heads, 8);
  EXPECT_EQ(r.n_routed_experts, 16);
  EXPECT_EQ(r.vocab_size, 512);
  EXPECT_EQ(r.scoring_func, ScoringFunc::Sigmoid);
  EXPECT_EQ(r.rope_scaling.factor, 8);
  // Changing the layer counts through --set keeps compress_ratios consistent.
  c = {};
  c.set = {parse_set_option("num_nextn_predict_layers=2"), parse_set_option("num_hidden_layers=2")};
  r = build_config(tiny, c);
  EXPECT_EQ(r.compress_ratios, (std::vector<int64_t>{0, 4, 0, 0}));

  // Errors name the key or the option.
  c = {};
  c.set = {parse_set_option("hidden_size=200")};
  EXPECT_NE(error_of([&] { build_config(tiny, c); }).find("hidden_size"), std::string::npos);
  c.set = {parse_set_option("sliding_windw=8")};
  EXPECT_NE(error_of([&] { build_config(tiny, c); }).find("'sliding_windw' is not a configuration key"),
            std::string::npos);
  c.set = {parse_set_option("num_attention_heads=3")};
  EXPECT_NE(error_of([&] { build_config(tiny, c); }).find("num_attention_heads"), std::string::npos);
  c.set = {parse_set_option("compress_ratios=[0,4]")};
  EXPECT_NE(error_of([&] { build_config(tiny, c); }).find("compress_ratios"), std::string::npos);
  c = {};
  c.ratios = std::vector<int64_t>{0, 5};
  c.layers = 3;
  EXPECT_NE(error_of([&] { build_config(tiny, c); }).find("--layers 3 disagrees"), std::string::npos);
  EXPECT_NE(error_of([] { parse_ratio_list("0,4,x"); }).find("'x' is not an integer"), std::string::npos);
  EXPECT_NE(error_of([] { parse_set_option("novalue"); }).find("key=json_value"), std::string::npos);
  EXPECT_NE(error_of([] { find_preset("huge"); }).find("known presets: tiny, v4-flash"), std::string::npos);
}

TEST(WeightJobs, CoverTheTensorTableInOrder) {
  const ModelConfig c = build_config(find_preset("tiny"), {});
  for (bool mtp : {true, false}) {
    const std::vector<TensorSpec> specs = expected_tensors(c, mtp);
    const std::vector<TensorDecl> decls = job_outputs(plan_weight_jobs(c, mtp));
    ASSERT_EQ(decls.size(), specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      EXPECT_EQ(decls[i].name, specs[i].name);
      EXPECT_EQ(decls[i].shape, specs[i].shape);
      EXPECT_EQ(decls[i].dtype, specs[i].dtypes.front());
    }
  }
  // Chunk sizes add up to the tensors' sizes.
  for (const WeightJob& job : plan_weight_jobs(build_config(find_preset("v4-flash"), {}), true)) {
    uint64_t w = 0, s = 0;
    for (int64_t k = 0; k < job.num_chunks(); ++k) {
      w += job.chunk_size(k).weight;
      s += job.chunk_size(k).scale;
    }
    ASSERT_EQ(w, job.outputs[0].nbytes()) << job.name;
    ASSERT_EQ(s, job.outputs.size() > 1 ? job.outputs[1].nbytes() : 0) << job.name;
    if (job.encoding == Encoding::FP8) {
      ASSERT_EQ(job.chunk_rows() % 128, 0) << job.name;
    }
  }
}

TEST(MakeCheckpoint, SameBytesWhateverTheThreadCount) {
  std::vector<std::string> runs;
  for (int threads : {1, 3}) {
    MakeCheckpointOptions o;
    o.preset = "tiny";
    o.seed = 42;
    o.threads = threads;
    o.out = test::scratch_dir("lib_threads_" + std::to_string(threads));
    const MakeCheckpointResult r = make_checkpoint(o);
    EXPECT_GE(r.shards, 2);
    std::string all;
    for (int s = 0; s < r.shards; ++s) all += file_bytes(o.out / shard_file_name(s, r.shards));
    all += file_bytes(o.out / "model.safetensors.index.json") + file_bytes(o.out / "config.json");
    runs.push_back(all);
    // The model binds every tensor of the table.
    const TensorStore store = TensorStore::open(o.out);
    const ModelWeights w = bind_weights(store, load_config(o.out / "config.json"));
    EXPECT_EQ(w.layers.size(), 4u);
    EXPECT_EQ(w.mtp.size(), 1u);
  }
  EXPECT_EQ(runs[0], runs[1]);
}

// Dequantized [rows, cols] values of an FP8 weight.
std::vector<float> fp8_values(const TensorStore& s, const std::string& prefix) {
  const TensorInfo& w = s.get(prefix + ".weight");
  const TensorInfo& sc = s.get(prefix + ".scale");
  std::vector<float> v(size_t(w.numel()));
  dequantize_fp8_blocks(w.data, sc.data, w.shape[0], w.shape[1], v.data());
  return v;
}

TEST(AlignedWeights, TargetPredictsSuccessorAndMtpIsIdentity) {
  MakeCheckpointOptions o;
  o.preset = "aligned";
  o.seed = 3;
  o.out = test::scratch_dir("lib_aligned");
  make_checkpoint(o);
  const TensorStore s = TensorStore::open(o.out);
  const ModelConfig c = load_config(o.out / "config.json");
  const int64_t D = c.hidden_size, V = c.vocab_size;

  // e_proj = I exactly (1.0 x 2^0), h_proj = 0, every block output projection 0.
  const std::vector<float> e = fp8_values(s, "mtp.0.e_proj");
  for (int64_t i = 0; i < D; ++i)
    for (int64_t j = 0; j < D; ++j) ASSERT_EQ(e[size_t(i * D + j)], i == j ? 1.0f : 0.0f);
  for (uint8_t b : std::vector<uint8_t>(s.get("mtp.0.e_proj.scale").data,
                                        s.get("mtp.0.e_proj.scale").data + s.get("mtp.0.e_proj.scale").nbytes))
    EXPECT_EQ(b, 127);
  for (float v : fp8_values(s, "mtp.0.h_proj")) ASSERT_EQ(v, 0.0f);
  int64_t outputs = 0, norms = 0;  // counted, so that a renamed tensor cannot leave the checks with nothing to check
  for (const TensorInfo* t : s.all()) {
    const std::string& n = t->name;
    const bool output = n.ends_with("attn.wo_b.weight") || n.ends_with("shared_experts.w2.weight") ||
                        (n.find(".experts.") != std::string::npos && n.ends_with(".w2.weight"));
    if (!output) continue;
    ++outputs;
    for (size_t i = 0; i < t->nbytes; ++i) ASSERT_EQ(t->data[i], 0) << n;
  }
  EXPECT_GT(outputs, 0);
  for (const TensorInfo* t : s.all()) {
    if (!t->name.ends_with("norm.weight")) continue;
    ++norms;
    for (float v : test::read_f32(*t)) ASSERT_EQ(v, 1.0f) << t->name;
  }
  EXPECT_GT(norms, 0);

  // logits of token t after the final norm: head . (e_t * sqrt(D) / ||e_t||); argmax = f(t).
  const std::vector<int64_t> f = aligned_successor(c, o.seed);
  const std::vector<float> embed = test::read_f32(s.get("embed.weight"));
  const std::vector<float> head = test::read_f32(s.get("head.weight"));
  double min_margin = 1e9;
  for (int64_t t = 0; t < V; t += 7) {
    double norm = 0;
    for (int64_t i = 0; i < D; ++i) norm += double(embed[size_t(t * D + i)]) * embed[size_t(t * D + i)];
    const double k = std::sqrt(double(D) / norm);
    double best = -1e30, second = -1e30;
    int64_t arg = -1;
    for (int64_t v = 0; v < V; ++v) {
      double logit = 0;
      for (int64_t i = 0; i < D; ++i) logit += double(head[size_t(v * D + i)]) * embed[size_t(t * D + i)] * k;
      if (logit > best) {
        second = best;
        best = logit;
        arg = v;
      } else if (logit > second) {
        second = logit;
      }
    }
    ASSERT_EQ(arg, f[size_t(t)]) << "token " << t;
    min_margin = std::min(min_margin, best - second);
  }
  EXPECT_GT(min_margin, 20.0);  // alpha * sqrt(D) = 64 for the top logit, the others ~N(0, 16)
}

TEST(AlignedWeights, PerturbDegradesEProj) {
  const ModelConfig c = build_config(find_preset("aligned"), {});
  const auto jobs = aligned_weight_jobs(c, true, 3, AlignedOptions{0.5});
  bool found = false;
  for (const WeightJob& job : jobs) {
    if (job.name != "mtp.0.e_proj.weight") continue;
    found = true;
    EXPECT_FALSE(job.fixed_fp8_scale_exp.has_value());
    std::vector<float> v(size_t(job.rows * job.cols));
    RandomStream rng(3, job.name, 0);
    job.fill(0, job.rows, rng, v.data());
    double off = 0, diag = 0;
    for (int64_t i = 0; i < job.rows; ++i)
      for (int64_t j = 0; j < job.cols; ++j) {
        const double x = v[size_t(i * job.cols + j)];
        if (i == j) diag += x;
        else off += x * x;
      }
    EXPECT_NEAR(diag / double(job.rows), 1.0, 0.01);
    // Off-diagonal std = X / sqrt(D).
    EXPECT_NEAR(std::sqrt(off / double(job.rows * (job.cols - 1))), 0.5 / std::sqrt(double(job.cols)), 0.002);
  }
  ASSERT_TRUE(found) << "no job for mtp.0.e_proj.weight";
  EXPECT_NE(error_of([&] { aligned_weight_jobs(c, true, 3, AlignedOptions{-1.0}); }).find("--perturb"),
            std::string::npos);
}

}  // namespace
}  // namespace dsv4

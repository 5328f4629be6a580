// DeepSeek-V4-Flash-0731's DSpark drafter on the loading side: its config.json (the golden
// tiny-dspark-a's, and the errors naming the key), the make-checkpoint presets that carry it, the
// HF naming and config dialect, and the mirror-dspark construction.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "checkpoint/aligned_weights.h"
#include "checkpoint/make_checkpoint.h"
#include "checkpoint/presets.h"
#include "core/error.h"
#include "io/config.h"
#include "io/config_hf.h"
#include "io/safetensors.h"
#include "model/tensor_names.h"
#include "model/weights.h"
#include "support/test_support.h"

namespace dsv4 {
namespace dspark_config_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path golden_dir() { return test::data_path("tiny-dspark-a"); }

json golden_json() {
  std::ifstream in(golden_dir() / "config.json");
  return json::parse(in);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

void expect_config_error(const json& j, const std::vector<std::string>& parts) {
  const std::string msg = error_of([&] { parse_config(j, "test.json"); });
  for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

TEST(DSparkConfig, GoldenTinyDSparkAParses) {
  const ModelConfig c = load_config(golden_dir() / "config.json");
  EXPECT_TRUE(c.has_dspark());
  EXPECT_EQ(c.dspark_block_size, 5);
  EXPECT_EQ(c.dspark_noise_token_id, 1000);
  EXPECT_EQ(c.dspark_target_layer_ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(c.dspark_markov_rank, 64);
  EXPECT_EQ(c.num_nextn_predict_layers, 1);  // as 0731 says, beside 3 stages
  EXPECT_EQ(c.num_drafter_layers(), 3);
  EXPECT_EQ(c.num_layers_total(), 7);
  EXPECT_EQ(c.compress_ratios, (std::vector<int64_t>{0, 4, 128, 4, 0, 0, 0}));
  // to_json writes the keys back, and parsing that gives the same configuration.
  const json j = c.to_json();
  EXPECT_EQ(j["dspark_target_layer_ids"], json::array({1, 2, 3}));
  EXPECT_EQ(parse_config(j, "round trip").to_json(), j);
  // A configuration without the keys writes none of them.
  EXPECT_FALSE(load_config(test::tiny_a_dir() / "config.json").to_json().contains("dspark_block_size"));
}

TEST(DSparkConfig, ErrorsNameTheKey) {
  json j = golden_json();
  j["dspark_target_layer_ids"] = json::array({1, 2, 4});
  expect_config_error(j, {"dspark_target_layer_ids", "entry 2 is 4", "[0, 4)"});
  j = golden_json();
  j["dspark_target_layer_ids"] = json::array({2, 1, 3});
  expect_config_error(j, {"dspark_target_layer_ids", "strictly increasing"});
  j = golden_json();
  j["dspark_target_layer_ids"] = json::array();
  expect_config_error(j, {"dspark_target_layer_ids", "empty"});
  j = golden_json();
  j["dspark_noise_token_id"] = 1024;
  expect_config_error(j, {"dspark_noise_token_id", "1024", "outside the vocabulary"});
  j = golden_json();
  j["dspark_markov_rank"] = 0;
  expect_config_error(j, {"dspark_markov_rank", "positive"});
  j = golden_json();
  j["dspark_block_size"] = 1;
  expect_config_error(j, {"dspark_block_size", "at least 2"});
  j = golden_json();
  j["compress_ratios"] = json::array({0, 4, 128, 4});  // no stage
  expect_config_error(j, {"compress_ratios", "DSpark"});
  j = golden_json();
  j["compress_ratios"] = json::array({0, 4, 128, 4, 0, 4, 0});
  expect_config_error(j, {"compress_ratios", "entry 5", "DSpark stage", "must be 0"});
  j = golden_json();
  j["dspark_target_layer_ids"] = "1,2,3";
  expect_config_error(j, {"dspark_target_layer_ids"});
}

// The HF dialect drops compress_ratios for layer_types, which cannot say how many stages follow.
TEST(DSparkConfig, HfDialectKeepsTheStageCount) {
  const ModelConfig c = load_config(golden_dir() / "config.json");
  const json hf = to_hf_config_json(c);
  EXPECT_TRUE(hf.contains("layer_types"));
  EXPECT_EQ(hf["compress_ratios"], json::array({0, 4, 128, 4, 0, 0, 0}));
  const ModelConfig back = parse_config(hf, "hf.json");
  EXPECT_EQ(back.num_drafter_layers(), 3);
  EXPECT_EQ(back.to_json(), c.to_json());
}

// Every DSpark tensor name: a release name is a fixed point, and its HF name translates back.
TEST(DSparkConfig, EveryDrafterNameRoundTripsThroughHfNames) {
  const ModelConfig c = load_config(golden_dir() / "config.json");
  size_t drafter = 0;
  for (const TensorSpec& s : expected_tensors(c, true)) {
    EXPECT_EQ(release_tensor_name(s.name), s.name);
    EXPECT_EQ(release_tensor_name(hf_tensor_name(s.name)), s.name) << hf_tensor_name(s.name);
    drafter += s.name.rfind("mtp.", 0) == 0;
  }
  EXPECT_EQ(drafter, 241u);  // tiny-dspark-a's mtp.* tensors (581 - the target's 340)
  for (const char* name : {"mtp.0.main_proj.weight", "mtp.2.markov_head.markov_w2.weight",
                           "mtp.2.confidence_head.proj.weight", "mtp.2.hc_head_fn", "mtp.1.attn.wq_a.weight"})
    EXPECT_EQ(release_tensor_name(hf_tensor_name(name)), name);
  EXPECT_EQ(hf_tensor_name("mtp.1.attn.wq_a.weight"), "mtp.1.self_attn.q_a_proj.weight");
}

TEST(DSparkPresets, TinyDSparkIsTheGoldenConfig) {
  const ModelConfig golden = load_config(golden_dir() / "config.json");
  EXPECT_EQ(build_config(find_preset("tiny-dspark"), {}).to_json(), golden.to_json());
  const ModelConfig mirror = build_config(find_preset("mirror-dspark"), {});
  EXPECT_EQ(mirror.max_position_embeddings, 4096);
  EXPECT_EQ(mirror.dspark_target_layer_ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(mirror.num_drafter_layers(), 3);
}

TEST(DSparkPresets, LayersKeepTheStagesAndTapTheLastLayers) {
  const Preset& p = find_preset("tiny-dspark");
  ConfigChanges c;
  c.layers = 2;
  ModelConfig r = build_config(p, c);
  EXPECT_EQ(r.compress_ratios, (std::vector<int64_t>{0, 4, 0, 0, 0}));
  EXPECT_EQ(r.dspark_target_layer_ids, (std::vector<int64_t>{0, 1}));
  c.layers = 6;
  r = build_config(p, c);
  EXPECT_EQ(r.compress_ratios, (std::vector<int64_t>{0, 4, 128, 4, 0, 4, 0, 0, 0}));
  EXPECT_EQ(r.dspark_target_layer_ids, (std::vector<int64_t>{3, 4, 5}));
  c.set = {parse_set_option("dspark_target_layer_ids=[0,5]")};
  EXPECT_EQ(build_config(p, c).dspark_target_layer_ids, (std::vector<int64_t>{0, 5}));
  c.set = {parse_set_option("dspark_target_layer_ids=[0,6]")};
  EXPECT_NE(error_of([&] { build_config(p, c); }).find("dspark_target_layer_ids"), std::string::npos);
  c = {};
  c.ratios = parse_ratio_list("4,0");
  r = build_config(p, c);
  EXPECT_EQ(r.compress_ratios, (std::vector<int64_t>{4, 0, 0, 0, 0}));
  EXPECT_EQ(r.num_drafter_layers(), 3);
  c = {};
  c.set = {parse_set_option("compress_ratios=[0,4,128,0,0,0]")};  // 3 layers + the 3 stages
  r = build_config(p, c);
  EXPECT_EQ(r.num_hidden_layers, 3);
  EXPECT_EQ(r.dspark_target_layer_ids, (std::vector<int64_t>{0, 1, 2}));
}

TEST(DSparkPresets, V4FlashWithFewerExpertsValidates) {
  const Preset& p = find_preset("mirror-dspark-v4-flash");
  ConfigChanges c;
  c.set = {parse_set_option("n_routed_experts=64")};
  const ModelConfig r = build_config(p, c);
  EXPECT_EQ(r.n_routed_experts, 64);
  EXPECT_EQ(r.hidden_size, 4096);
  EXPECT_EQ(r.num_hidden_layers, 3);
  EXPECT_EQ(r.compress_ratios, (std::vector<int64_t>{0, 4, 128, 0, 0, 0}));
  EXPECT_EQ(r.dspark_target_layer_ids, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(r.dspark_block_size, 5);
  EXPECT_EQ(r.dspark_markov_rank, 256);
  EXPECT_EQ(r.dspark_noise_token_id, 128799);
  EXPECT_EQ(r.sliding_window, 128);
  // The stages' experts shrink with the target's: the table has 64 per stage.
  size_t stage_experts = 0;
  for (const TensorSpec& s : expected_tensors(r, true))
    stage_experts += s.name.rfind("mtp.1.ffn.experts.", 0) == 0 && s.name.ends_with(".w1.weight");
  EXPECT_EQ(stage_experts, 64u);
}

std::map<std::string, std::string> tensor_bytes(const fs::path& dir) {
  const TensorStore s = TensorStore::open(dir);
  std::map<std::string, std::string> out;
  for (const TensorInfo* t : s.all())
    out[t->name] = std::string(dtype_name(t->dtype)) + TensorInfo{t->name, t->dtype, t->shape}.shape_string() +
                   std::string(reinterpret_cast<const char*>(t->data), t->nbytes);
  return out;
}

MakeCheckpointResult make(const std::string& preset, const fs::path& out, double perturb = 0.0,
                          float mirror_context = MirrorOptions{}.context,
                          float dspark_context = MirrorDSparkOptions{}.context) {
  MakeCheckpointOptions o;
  o.preset = preset;
  o.seed = 11;
  o.out = out;
  o.perturb = perturb;
  o.mirror.context = mirror_context;
  o.mirror_dspark.context = dspark_context;
  return make_checkpoint(o);
}

// The target tensors that differ between two checkpoints (every target tensor of `a` is in `b`).
std::vector<std::string> target_differences(const std::map<std::string, std::string>& a,
                                            const std::map<std::string, std::string>& b, size_t* compared) {
  std::vector<std::string> differ;
  *compared = 0;
  for (const auto& [name, bytes] : a) {
    if (name.rfind("mtp.", 0) == 0) continue;
    ++*compared;
    auto it = b.find(name);
    if (it == b.end() || it->second != bytes) differ.push_back(name);
  }
  return differ;
}

// mirror-dspark's target is mirror's construction with its own layer-0 attention strength: the
// same bytes as `mirror` with that strength, only layers.0.attn.wo_b apart from mirror's default.
TEST(MirrorDSpark, TargetTensorsAreMirrorsByteForByte) {
  const float context = MirrorDSparkOptions{}.context;
  ASSERT_NE(context, MirrorOptions{}.context);
  const fs::path mirror_dir = test::scratch_dir("lib_mirror_for_dspark"), dspark_dir = test::scratch_dir("lib_mirror_dspark");
  make("mirror", mirror_dir, 0.0, context);
  make("mirror-dspark", dspark_dir);
  const auto dspark = tensor_bytes(dspark_dir);
  size_t compared = 0, mirror_target = 0;
  EXPECT_EQ(target_differences(dspark, tensor_bytes(mirror_dir), &compared), std::vector<std::string>{});
  for (const auto& [name, bytes] : tensor_bytes(mirror_dir)) mirror_target += name.rfind("mtp.", 0) != 0;
  EXPECT_EQ(compared, mirror_target);
  EXPECT_EQ(compared, 340u);
  size_t drafter = 0;
  for (const auto& [name, bytes] : dspark) drafter += name.rfind("mtp.", 0) == 0;
  EXPECT_EQ(drafter, 241u);  // the 3 stages' tensors (tiny-dspark-a's table)

  make("mirror", mirror_dir);  // mirror's own default
  EXPECT_EQ(target_differences(dspark, tensor_bytes(mirror_dir), &compared),
            (std::vector<std::string>{"layers.0.attn.wo_b.scale", "layers.0.attn.wo_b.weight"}));
  make("mirror-dspark", dspark_dir, 0.0, MirrorOptions{}.context, MirrorOptions{}.context);
  EXPECT_EQ(target_differences(tensor_bytes(dspark_dir), tensor_bytes(mirror_dir), &compared), std::vector<std::string>{});

  const TensorStore s = TensorStore::open(dspark_dir);
  const ModelWeights w = bind_weights(s, load_config(dspark_dir / "config.json"));
  ASSERT_TRUE(w.dspark.has_value());
  EXPECT_EQ(w.dspark->stages.size(), 3u);
}

// The Markov bias W2 · W1[prev] peaks at the mirror head's successor f(prev), with value ~beta;
// --perturb gives a fraction of the tokens another successor.
TEST(MirrorDSpark, MarkovHeadFollowsTheSuccessor) {
  for (double perturb : {0.0, 0.3}) {
    const fs::path dir = test::scratch_dir("lib_mirror_dspark_markov");
    make("mirror-dspark", dir, perturb);
    const TensorStore s = TensorStore::open(dir);
    const ModelConfig c = load_config(dir / "config.json");
    const std::vector<int64_t> f = aligned_successor(c, 11);
    const std::vector<float> w1 = test::read_f32(s.get("mtp.2.markov_head.markov_w1.weight"));
    const std::vector<float> w2 = test::read_f32(s.get("mtp.2.markov_head.markov_w2.weight"));
    const int64_t V = c.vocab_size, r = c.dspark_markov_rank;
    int64_t follows = 0, checked = 0;
    double min_margin = 1e9;
    for (int64_t prev = 0; prev < V; prev += 3, ++checked) {
      std::vector<double> bias(static_cast<size_t>(V), 0.0);
      for (int64_t v = 0; v < V; ++v)
        for (int64_t i = 0; i < r; ++i) bias[size_t(v)] += double(w2[size_t(v * r + i)]) * w1[size_t(prev * r + i)];
      const int64_t arg = test::argmax(std::vector<float>(bias.begin(), bias.end()).data(), V);
      EXPECT_NEAR(bias[size_t(arg)], 8.0, 0.1);
      if (arg != f[size_t(prev)]) continue;
      ++follows;
      double second = -1e9;
      for (int64_t v = 0; v < V; ++v)
        if (v != arg) second = std::max(second, bias[size_t(v)]);
      min_margin = std::min(min_margin, bias[size_t(arg)] - second);
    }
    if (perturb == 0.0) {
      EXPECT_EQ(follows, checked);
      EXPECT_GT(min_margin, 3.0);  // beta 8, the others' largest ~0.41 beta
      // The block's own logits are bounded by base_vote: the last stage's norm is gamma.
      const std::vector<float> norm = test::read_f32(s.get("mtp.2.norm.weight"));
      EXPECT_NEAR(norm[0], 2.0 / (4.0 * std::sqrt(double(c.hidden_size))), 1e-3);
      EXPECT_EQ(test::read_f32(s.get("mtp.0.main_norm.weight"))[0], 1.0f);
    } else {
      EXPECT_NEAR(double(follows) / double(checked), 0.7, 0.06);
    }
  }
}

}  // namespace
}  // namespace dspark_config_test
}  // namespace dsv4

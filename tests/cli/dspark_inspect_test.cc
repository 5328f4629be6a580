// `dsv4 inspect` and loading on DSpark checkpoints (DeepSeek-V4-Flash-0731): the golden
// tiny-dspark-a, damaged copies of it (every problem named, by inspect and by bind_weights), a
// checkpoint whose config and drafter disagree, one without its drafter, and tiny-dspark in every
// encoding make-checkpoint writes.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors_writer.h"
#include "core/error.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "model/weights.h"
#include "support/test_support.h"

namespace dsv4 {
namespace dspark_inspect_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path golden_dir() { return test::data_path("tiny-dspark-a"); }

// A writable copy of tiny-dspark-a's checkpoint files (not its golden outputs).
fs::path copy_golden(const std::string& name) {
  const fs::path dir = test::scratch_dir(name);
  for (const auto& e : fs::directory_iterator(golden_dir())) {
    const std::string f = e.path().filename().string();
    if (f != "config.json" && f != "model.safetensors.index.json" && f.rfind("model-", 0) != 0) continue;
    fs::copy_file(e.path(), dir / f);
    fs::permissions(dir / f, fs::perms::owner_read | fs::perms::owner_write);
  }
  return dir;
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

// Rewrites the shard holding `tensor` (per the index): `edit` may change its declaration (bytes cut
// or padded to the new size) or return false to drop it, which also drops it from the index.
void edit_tensor(const fs::path& dir, const std::string& tensor, const std::function<bool(TensorDecl&)>& edit) {
  json index = read_json(dir / "model.safetensors.index.json");
  const fs::path shard = dir / index["weight_map"][tensor].get<std::string>();
  std::vector<TensorDecl> decls;
  std::vector<std::vector<uint8_t>> bytes;
  bool kept = true;
  {
    auto file = SafetensorsFile::open(shard);
    for (const TensorInfo& t : file->tensors()) {
      TensorDecl d{t.name, t.dtype, t.shape};
      if (t.name == tensor && !(kept = edit(d))) continue;
      bytes.emplace_back(t.data, t.data + std::min<size_t>(t.nbytes, size_t(d.nbytes())));
      bytes.back().resize(size_t(d.nbytes()));
      decls.push_back(d);
    }
  }
  SafetensorsWriter w(shard.string() + ".new", decls);
  for (size_t i = 0; i < decls.size(); ++i) w.write_tensor(decls[i].name, bytes[i].data(), bytes[i].size());
  w.finish();
  fs::rename(shard.string() + ".new", shard);
  if (!kept) {
    index["weight_map"].erase(tensor);
    std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
  }
}

std::pair<int, json> json_report(const fs::path& dir) {
  const auto r = test::run_shell(std::string("(") + DSV4_CLI + " inspect --json " + dir.string() + " 2>/dev/null)");
  return {r.exit_code, json::parse(r.out)};
}

void expect_text(const test::CommandOutput& r, int code, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.exit_code, code) << r.out;
  for (const std::string& p : parts) EXPECT_NE(r.out.find(p), std::string::npos) << "'" << p << "' not in:\n" << r.out;
}

// What loading says: bind_weights's error, or "bound".
std::string load_error(const fs::path& dir) {
  try {
    const TensorStore store = TensorStore::open(dir);
    bind_weights(store, load_config(dir / "config.json"));
  } catch (const Error& e) {
    return e.what();
  }
  return "bound";
}

const json* module_named(const json& report, const std::string& name) {
  for (const json& m : report["modules"])
    if (m["module"] == name) return &m;
  return nullptr;
}

TEST(DSparkInspect, GoldenTinyDSparkAIsComplete) {
  const auto r = test::run_cli("inspect " + golden_dir().string());
  expect_text(r, 0, {"4 layers + 3 DSpark stages", "DSpark drafter: 3 stages, block 5, taps 1,2,3, Markov rank 64",
                     "per draft step", "status: complete"});
  EXPECT_EQ(r.out.find("MTP: "), std::string::npos) << r.out;

  const auto [code, report] = json_report(golden_dir());
  ASSERT_EQ(code, 0);
  EXPECT_TRUE(report["complete"].get<bool>());
  EXPECT_EQ(report["tensors"], 581);
  EXPECT_FALSE(report["mtp_present"].get<bool>());
  const json& d = report["dspark"];
  EXPECT_TRUE(d["present"].get<bool>());
  EXPECT_EQ(d["stages"], 3);
  EXPECT_EQ(d["block_size"], 5);
  EXPECT_EQ(d["target_layer_ids"], json::array({1, 2, 3}));
  EXPECT_EQ(d["markov_rank"], 64);
  EXPECT_EQ(d["noise_token_id"], 1000);
  for (const char* g : {"mtp.0", "mtp.1", "mtp.2"}) EXPECT_GT(report["group_bytes"][g].get<uint64_t>(), 0u) << g;

  // The draft step's bytes: at least the target's head (once) and 5 reads of the Markov W2; the
  // stages' 8 experts all (5 rows x 2 per token); not counted in the target's decode step.
  const json* m = module_named(report, "DSpark");
  ASSERT_NE(m, nullptr) << report["modules"].dump();
  EXPECT_EQ((*m)["per"], "draft step");
  const double head = 1024 * 256 * 2, w2 = 1024 * 64 * 2, expert = 3 * 128 * 256 * 0.5 * (1 + 1.0 / 16);
  EXPECT_GT((*m)["bytes_per_token"].get<double>(), head + 5 * w2 + 3 * 8 * expert);
  EXPECT_LT((*m)["bytes_per_token"].get<double>(), (*m)["bytes"].get<double>() + head + 4 * w2);
  double target = 0;
  for (const json& g : report["modules"])
    if (g["module"] != "DSpark") target += g["bytes_per_token"].get<double>();
  EXPECT_DOUBLE_EQ(report["decode_bytes_per_token"].get<double>(), target);
  EXPECT_EQ(load_error(golden_dir()), "bound");
}

// A missing DSpark tensor, even the ones that tell a drafter's stages apart, is named, by inspect
// and by loading.
TEST(DSparkInspect, MissingDrafterTensorIsNamed) {
  for (const std::string name : {"mtp.0.main_proj.weight", "mtp.2.attn_norm.weight", "mtp.2.markov_head.markov_w1.weight"}) {
    const fs::path dir = copy_golden("dspark_missing");
    edit_tensor(dir, name, [](TensorDecl&) { return false; });
    expect_text(test::run_cli("inspect " + dir.string()), 1,
                {"missing: " + name, "missing tensors: 1", "DSpark drafter: 3 stages", "status: INCOMPLETE"});
    const auto [code, report] = json_report(dir);
    EXPECT_EQ(code, 1);
    EXPECT_EQ(report["missing"], json::array({name}));
    EXPECT_TRUE(report["dspark"]["present"].get<bool>());
    EXPECT_NE(load_error(dir).find("missing tensor '" + name + "'"), std::string::npos) << load_error(dir);
  }
}

TEST(DSparkInspect, MisShapedDrafterTensorIsNamed) {
  const fs::path dir = copy_golden("dspark_misshaped");
  const std::string name = "mtp.2.markov_head.markov_w2.weight";  // BF16 [1024, 64]
  edit_tensor(dir, name, [](TensorDecl& d) {
    d.shape = {1024, 32};
    return true;
  });
  expect_text(test::run_cli("inspect " + dir.string()), 1,
              {"mismatched: " + name + ": shape [1024, 32], expected [1024, 64]"});
  const std::string error = load_error(dir);
  EXPECT_NE(error.find(name), std::string::npos) << error;
  EXPECT_NE(error.find("expected [1024, 64]"), std::string::npos) << error;
}

// The tensors and config.json disagree about the drafter: refused with what each says.
TEST(DSparkInspect, DrafterAndConfigDisagree) {
  const fs::path dir = copy_golden("dspark_no_keys");
  json config = read_json(dir / "config.json");
  for (const char* key : {"dspark_block_size", "dspark_noise_token_id", "dspark_target_layer_ids", "dspark_markov_rank"})
    config.erase(key);
  config["compress_ratios"] = json::array({0, 4, 128, 4, 0});  // a V4-Flash config: one MTP layer
  std::ofstream(dir / "config.json") << config.dump(2);
  expect_text(test::run_cli("inspect " + dir.string()), 1,
              {"inconsistent: ", "holds a DSpark drafter", "no dspark_* keys", "status: INCOMPLETE"});
  EXPECT_FALSE(json_report(dir).second["complete"].get<bool>());
  EXPECT_NE(load_error(dir).find("no dspark_* keys"), std::string::npos) << load_error(dir);

  // A classic MTP module under a DSpark config.
  const fs::path mtp = test::scratch_dir("dspark_keys_on_mtp");
  for (const auto& e : fs::directory_iterator(test::tiny_a_dir())) {
    const std::string f = e.path().filename().string();
    if (f.rfind("model", 0) != 0) continue;
    fs::copy_file(e.path(), mtp / f);
  }
  json keys = read_json(test::tiny_a_dir() / "config.json");
  for (const char* key : {"dspark_block_size", "dspark_noise_token_id", "dspark_target_layer_ids", "dspark_markov_rank"})
    keys[key] = read_json(golden_dir() / "config.json")[key];
  std::ofstream(mtp / "config.json") << keys.dump(2);
  expect_text(test::run_cli("inspect " + mtp.string()), 1,
              {"classic MTP module (mtp.0.enorm.weight)", "DSpark drafter: absent (not bound"});
  EXPECT_NE(load_error(mtp).find("classic MTP module"), std::string::npos) << load_error(mtp);
}

TEST(DSparkInspect, WithoutItsDrafterTheTargetLoadsAlone) {
  const fs::path dir = test::scratch_dir("dspark_no_drafter");
  const auto made = test::run_cli("make-checkpoint --quiet --preset tiny-dspark --seed 2 --no-mtp --out " + dir.string());
  ASSERT_EQ(made.exit_code, 0) << made.out;
  expect_text(test::run_cli("inspect " + dir.string()), 0,
              {"DSpark drafter: absent (the checkpoint has no mtp.* tensors: the target runs alone)", "status: complete"});
  const auto [code, report] = json_report(dir);
  EXPECT_EQ(code, 0);
  EXPECT_FALSE(report["dspark"]["present"].get<bool>());
  EXPECT_EQ(report["config"]["dspark_block_size"], 5);
  EXPECT_EQ(module_named(report, "DSpark"), nullptr);
  ASSERT_TRUE(report["group_bytes"].contains("layers.0"));
  for (auto& [group, bytes] : report["group_bytes"].items()) EXPECT_NE(group.rfind("mtp.", 0), 0u) << group;
  const TensorStore store = TensorStore::open(dir);
  const ModelWeights w = bind_weights(store, load_config(dir / "config.json"));
  EXPECT_FALSE(w.dspark.has_value());
  EXPECT_TRUE(w.mtp.empty());
  EXPECT_EQ(w.layers.size(), 4u);
}

// tiny-dspark in every encoding: complete, the drafter bound, its weights where each encoding puts
// the drafter (the Markov and confidence heads BF16 throughout).
TEST(DSparkInspect, EveryEncodingBinds) {
  struct Case {
    const char* encoding;
    WeightFormat main_proj, stage_expert;
  };
  const Case cases[] = {{"release", WeightFormat::FP8, WeightFormat::FP4},   {"bf16", WeightFormat::BF16, WeightFormat::BF16},
                        {"hf-bf16", WeightFormat::BF16, WeightFormat::BF16}, {"fp8-experts", WeightFormat::FP8, WeightFormat::FP8},
                        {"nvfp4", WeightFormat::FP8, WeightFormat::FP4},     {"ct-nvfp4", WeightFormat::BF16, WeightFormat::BF16},
                        {"ct-fp8", WeightFormat::FP8F, WeightFormat::FP4},   {"ct-int4", WeightFormat::BF16, WeightFormat::BF16}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.encoding);
    const fs::path dir = test::scratch_dir(std::string("dspark_encoding_") + c.encoding);
    const auto made = test::run_cli("make-checkpoint --quiet --preset tiny-dspark --seed 4 --encoding " +
                                    std::string(c.encoding) + " --out " + dir.string());
    ASSERT_EQ(made.exit_code, 0) << made.out;
    const auto [code, report] = json_report(dir);
    EXPECT_EQ(code, 0) << report.dump(1);
    EXPECT_TRUE(report["complete"].get<bool>());
    EXPECT_TRUE(report["dspark"]["present"].get<bool>());
    EXPECT_EQ(report["dspark"]["stages"], 3);
    EXPECT_TRUE(report["aliases"].empty()) << report["aliases"].dump();  // no embed/head copies for DSpark
    EXPECT_NE(module_named(report, "DSpark"), nullptr);
    EXPECT_EQ(report["naming"], std::string(c.encoding) == "hf-bf16" ? "hf" : "release");

    const TensorStore store = TensorStore::open(dir);
    const ModelWeights w = bind_weights(store, load_config(dir / "config.json"));
    ASSERT_TRUE(w.dspark.has_value());
    ASSERT_EQ(w.dspark->stages.size(), 3u);
    EXPECT_EQ(w.dspark->main_proj.format, c.main_proj);
    EXPECT_EQ(w.dspark->stages[2].ffn.experts[7].w2.format, c.stage_expert);
    EXPECT_EQ(w.dspark->markov_w2.format, WeightFormat::BF16);
    EXPECT_EQ(w.dspark->confidence.format, WeightFormat::BF16);
  }
}

}  // namespace
}  // namespace dspark_inspect_test
}  // namespace dsv4

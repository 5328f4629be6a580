// `dsv4 inspect` on the golden checkpoint and on damaged copies of it: every problem
// gives a non-zero exit (never a signal) and a message naming it.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors_writer.h"
#include "io/safetensors.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* kShard1 = "model-00001-of-00002.safetensors";

// A scratch copy of tiny-a's checkpoint files (writable, unlike the checked-in data).
fs::path copy_tiny_a(const std::string& name) {
  const fs::path dir = test::scratch_dir(name);
  for (const char* f : {"config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                        "model.safetensors.index.json"}) {
    fs::copy_file(test::tiny_a_dir() / f, dir / f);
    fs::permissions(dir / f, fs::perms::owner_read | fs::perms::owner_write);
  }
  return dir;
}

// Rewrites a shard tensor by tensor: `edit` may change a declaration (its bytes are cut
// to the new size) or return false to drop the tensor.
void rewrite_shard(const fs::path& shard, const std::function<bool(TensorDecl&)>& edit) {
  std::vector<TensorDecl> decls;
  std::vector<std::vector<uint8_t>> bytes;
  {
    auto file = SafetensorsFile::open(shard);
    for (const TensorInfo& t : file->tensors()) {
      TensorDecl d{t.name, t.dtype, t.shape};
      if (!edit(d)) continue;
      bytes.emplace_back(t.data, t.data + std::min<size_t>(t.nbytes, size_t(d.nbytes())));
      bytes.back().resize(size_t(d.nbytes()));
      decls.push_back(d);
    }
  }
  const fs::path tmp = shard.string() + ".new";
  SafetensorsWriter w(tmp, decls);
  for (size_t i = 0; i < decls.size(); ++i) w.write_tensor(decls[i].name, bytes[i].data(), bytes[i].size());
  w.finish();
  fs::rename(tmp, shard);
}

// The shard holding `tensor`, per the index.
fs::path shard_of(const fs::path& dir, const std::string& tensor) {
  std::ifstream in(dir / "model.safetensors.index.json");
  return dir / json::parse(in)["weight_map"][tensor].get<std::string>();
}

// `dsv4 inspect --json DIR` with stderr dropped: the exit code and the parsed report.
std::pair<int, json> json_report(const fs::path& dir) {
  const auto r = test::run_shell(std::string("(") + DSV4_CLI + " inspect --json " + dir.string() + " 2>/dev/null)");
  return {r.exit_code, json::parse(r.out)};
}

void expect_failure(const test::CommandOutput& r, int code, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.exit_code, code) << r.out;
  EXPECT_LT(r.exit_code, 128) << "killed by a signal: " << r.out;
  for (const std::string& p : parts) EXPECT_NE(r.out.find(p), std::string::npos) << "'" << p << "' not in:\n" << r.out;
}

TEST(InspectCli, GoldenTinyAIsComplete) {
  const auto r = test::run_cli("inspect " + test::tiny_a_dir().string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("MTP: present"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("status: complete"), std::string::npos);
  EXPECT_NE(r.out.find("CSA (ratio 4, with indexer):    [1, 3]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("HCA (ratio 128):                [2]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hash-routed:                    [0]"), std::string::npos) << r.out;

  const auto [code, report] = json_report(test::tiny_a_dir());
  ASSERT_EQ(code, 0);
  EXPECT_TRUE(report["complete"].get<bool>());
  EXPECT_TRUE(report["mtp_present"].get<bool>());
  EXPECT_EQ(report["layers"]["window"], json::array({0}));
  EXPECT_EQ(report["layers"]["csa"], json::array({1, 3}));
  EXPECT_EQ(report["layers"]["hca"], json::array({2}));
  EXPECT_EQ(report["hash_layers"], json::array({0}));
  EXPECT_EQ(report["shards"], 2);
  EXPECT_EQ(report["tensors"], 427);
  EXPECT_EQ(report["bytes"], 7532718);  // the index's metadata.total_size
  EXPECT_EQ(report["dtypes"]["I8"]["tensors"], 120);
  EXPECT_TRUE(report["missing"].empty());
  EXPECT_TRUE(report["unexpected"].empty());
  EXPECT_TRUE(report["mismatched"].empty());
}

TEST(InspectCli, TruncatedShard) {
  const fs::path dir = copy_tiny_a("inspect_truncated");
  fs::resize_file(dir / kShard1, fs::file_size(dir / kShard1) / 2);
  expect_failure(test::run_cli("inspect " + dir.string()), 2,
                 {kShard1, "outside the data section", "truncated"});
  const auto [code, report] = json_report(dir);
  EXPECT_EQ(code, 2);
  EXPECT_FALSE(report["complete"].get<bool>());
  EXPECT_NE(report["error"].get<std::string>().find("truncated"), std::string::npos);
}

TEST(InspectCli, HeaderLengthBeyondTheFile) {
  const fs::path dir = copy_tiny_a("inspect_header_len");
  {
    std::fstream f(dir / kShard1, std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t huge = uint64_t(1) << 40;
    f.write(reinterpret_cast<const char*>(&huge), 8);
  }
  expect_failure(test::run_cli("inspect " + dir.string()), 2, {kShard1, "header length", "beyond the end of the file"});
}

TEST(InspectCli, MissingShard) {
  const fs::path dir = copy_tiny_a("inspect_missing_shard");
  fs::remove(dir / "model-00002-of-00002.safetensors");
  expect_failure(test::run_cli("inspect " + dir.string()), 2, {"missing shard", "model-00002-of-00002.safetensors"});
}

TEST(InspectCli, MissingMtpTensor) {
  const fs::path dir = copy_tiny_a("inspect_missing_tensor");
  const std::string name = "mtp.0.h_proj.weight";
  rewrite_shard(shard_of(dir, name), [&](TensorDecl& d) { return d.name != name; });
  json index;
  {
    std::ifstream in(dir / "model.safetensors.index.json");
    index = json::parse(in);
  }
  index["weight_map"].erase(name);
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
  expect_failure(test::run_cli("inspect " + dir.string()), 1,
                 {"missing: mtp.0.h_proj.weight", "missing tensors: 1", "MTP: present"});
  const auto [code, report] = json_report(dir);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(report["missing"], json::array({name}));
  EXPECT_FALSE(report["complete"].get<bool>());
  // The MTP loader: mtp.0.enorm.weight is there, so the module is present and a missing
  // part of it is an error naming the tensor (not a silent "absent").
  expect_failure(test::run_cli("generate --model " + dir.string() + " --prompt-tokens 0,1 --draft 1"), 1,
                 {"mtp.0.h_proj.weight"});
}

TEST(InspectCli, CheckpointWithoutMtpIsCompleteAndReportsItAbsent) {
  const fs::path dir = test::scratch_dir("no_mtp_module");
  auto made = test::run_cli("make-checkpoint --preset tiny --seed 3 --no-mtp --quiet --out " + dir.string());
  ASSERT_EQ(made.exit_code, 0) << made.out;
  const auto r = test::run_cli("inspect " + dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("MTP: absent"), std::string::npos) << r.out;
  const auto score = test::run_cli("score --model " + dir.string() + " --tokens 0,5,6,7 --prompt-len 2");
  EXPECT_EQ(score.exit_code, 0) << score.out;
  EXPECT_NE(score.out.find("MTP module: absent"), std::string::npos) << score.out;
}

TEST(InspectCli, ChangedShape) {
  const fs::path dir = copy_tiny_a("inspect_shape");
  const std::string name = "layers.0.attn_norm.weight";  // [256] BF16
  rewrite_shard(shard_of(dir, name), [&](TensorDecl& d) {
    if (d.name == name) d.shape = {2, 128};
    return true;
  });
  expect_failure(test::run_cli("inspect " + dir.string()), 1,
                 {"mismatched: layers.0.attn_norm.weight: shape [2, 128], expected [256]"});
}

TEST(InspectCli, ChangedDtypeAndUnexpectedTensor) {
  const fs::path dir = copy_tiny_a("inspect_dtype");
  const std::string name = "layers.1.attn.wq_a.scale";  // F8_E8M0 -> U8
  rewrite_shard(shard_of(dir, name), [&](TensorDecl& d) {
    if (d.name == name) d.dtype = DType::U8;
    return true;
  });
  expect_failure(test::run_cli("inspect " + dir.string()), 1,
                 {"mismatched: layers.1.attn.wq_a.scale: dtype U8, expected F8_E8M0"});

  // No MTP configured: the MTP tensors become unexpected.
  json config;
  {
    std::ifstream in(dir / "config.json");
    config = json::parse(in);
  }
  config["num_nextn_predict_layers"] = 0;
  config["compress_ratios"] = json::array({0, 4, 128, 4});
  std::ofstream(dir / "config.json") << config.dump();
  expect_failure(test::run_cli("inspect " + dir.string()), 1,
                 {"MTP: absent (num_nextn_predict_layers is 0)", "unexpected: mtp.0.e_proj.weight"});
}

TEST(InspectCli, NotACheckpoint) {
  const fs::path dir = test::scratch_dir("inspect_empty");
  expect_failure(test::run_cli("inspect " + dir.string()), 2, {"config.json"});
  expect_failure(test::run_cli("inspect " + (dir / "nothing").string()), 2, {"not a checkpoint directory"});
}

}  // namespace
}  // namespace dsv4

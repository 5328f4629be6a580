// Helpers of the checkpoint-encoding tests (encodings_test.cc, encodings_int4_test.cc): checkpoints
// written by `make-checkpoint --encoding`, inspected, scored and generated through the CLI, and
// edited copies of them for the bad-input and equal-values cases.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors_writer.h"
#include "io/safetensors.h"
#include "support/test_support.h"

namespace dsv4::encodings {

namespace fs = std::filesystem;
using nlohmann::json;

inline const std::string kTokens = "0,5,17,99,3,250,7,64,11";

inline fs::path make_encoded(const std::string& test, const std::string& encoding, const std::string& extra = "") {
  const fs::path dir = test::scratch_dir(test + "_" + encoding);
  const auto r = test::run_cli("make-checkpoint --quiet --preset tiny --seed 4 --encoding " + encoding + extra +
                               " --out " + dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return dir;
}

inline json inspect(const fs::path& dir) {
  const auto r = test::run_shell(std::string("(") + DSV4_CLI + " inspect --json " + dir.string() + " 2>/dev/null)");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return json::parse(r.out);
}

inline json module(const json& report, const std::string& name) {
  for (const json& m : report["modules"])
    if (m["module"] == name) return m;
  ADD_FAILURE() << "no module group '" << name << "' in " << report["modules"].dump();
  return json::object();
}

// target.logits and mtp.logits of `score` over kTokens (prompt of 3, the rest one at a time).
std::pair<std::vector<float>, std::vector<float>> logits(const fs::path& model) {
  const fs::path out = model / "score.safetensors";
  const auto r = test::run_cli("score --model " + model.string() + " --tokens " + kTokens + " --prompt-len 3 --out " +
                               out.string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const TensorStore s = TensorStore::open(out);
  return {test::read_f32(s.get("target.logits")), test::read_f32(s.get("mtp.logits"))};
}

inline json generate(const fs::path& model, int draft) {
  const auto r = test::run_cli("generate --model " + model.string() + " --prompt-tokens " + kTokens +
                               " --max-new-tokens 12 --ignore-eos --json --draft " + std::to_string(draft));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return json::parse(r.out.substr(r.out.find('{')));
}

double max_row_rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  return test::summarize(test::row_rel_l2(a, b, 1024)).max;  // tiny: vocabulary 1024
}

struct StoredTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// A copy of `src` in one model.safetensors, with `edit` applied to its tensors.
inline fs::path edited_copy(const fs::path& src, const std::string& name,
                     const std::function<void(std::vector<StoredTensor>&)>& edit) {
  const fs::path dst = test::scratch_dir(name);
  fs::copy_file(src / "config.json", dst / "config.json");
  std::vector<StoredTensor> tensors;
  {
    const TensorStore s = TensorStore::open(src);
    for (const TensorInfo* t : s.all()) tensors.push_back({t->name, t->dtype, t->shape, {t->data, t->data + t->nbytes}});
  }
  edit(tensors);
  std::vector<TensorDecl> decls;
  for (auto& t : tensors) decls.push_back({t.name, t.dtype, t.shape});
  SafetensorsWriter w(dst / "model.safetensors", decls);
  for (auto& t : tensors) w.write_tensor(t.name, t.bytes.data(), t.bytes.size());
  w.finish();
  return dst;
}

inline StoredTensor& find(std::vector<StoredTensor>& ts, const std::string& name) {
  for (auto& t : ts)
    if (t.name == name) return t;
  throw std::runtime_error("test: no tensor " + name);
}

inline void expect_load_error(const fs::path& dir, const std::vector<std::string>& parts) {
  const auto r = test::run_cli("score --model " + dir.string() + " --tokens 0,5,6 --prompt-len 2");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  for (const std::string& p : parts) EXPECT_NE(r.out.find(p), std::string::npos) << "'" << p << "' not in: " << r.out;
}

}  // namespace dsv4::encodings

// The score and generate commands end to end: outputs, formats and error handling.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/draft_head.h"
#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

std::string golden_tokens_csv(int64_t n = -1) {
  auto golden = TensorStore::open(test::tiny_a_dir() / "golden.safetensors");
  auto t = test::read_i64(golden.get("tokens"));
  std::string s;
  for (size_t i = 0; i < t.size() && (n < 0 || int64_t(i) < n); ++i) s += (i ? "," : "") + std::to_string(t[i]);
  return s;
}

TEST(ScoreCommand, WritesGoldenLayoutsAndMatchesTheReference) {
  const auto dir = test::scratch_dir("score");
  const std::string out = (dir / "score.safetensors").string(), dump = (dir / "dump.safetensors").string();
  auto r = test::run_cli("score --model " + test::tiny_a_dir().string() + " --tokens " + golden_tokens_csv() +
                         " --prompt-len 42 --out " + out + " --dump-intermediates " + dump);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("perplexity over positions 42..299"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MTP teacher-forced top-1 agreement"), std::string::npos) << r.out;

  auto scored = TensorStore::open(out);
  auto golden = TensorStore::open(test::tiny_a_dir() / "golden.safetensors");
  for (const char* name : {"target.logits", "target.hidden", "mtp.logits"}) {
    const TensorInfo& got = scored.get(name);
    const TensorInfo& want = golden.get(name);
    ASSERT_EQ(got.shape, want.shape) << name;
    const auto e = test::summarize(test::row_rel_l2(test::read_f32(got), test::read_f32(want), want.shape.back() *
                                                    (want.shape.size() == 3 ? want.shape[1] : 1)));
    EXPECT_LE(e.median, 0.03) << name;
    EXPECT_LE(e.max, 0.3) << name;
  }

  // The dump has the golden names and layouts of the required intermediates.
  auto dumped = TensorStore::open(dump);
  auto ops = TensorStore::open(test::tiny_a_dir() / "golden_ops.safetensors");
  int64_t compared = 0;
  for (const std::string phase : {"prefill", "decode"})
    for (int l = 0; l < 4; ++l)
      for (const char* n : {"in", "hc_attn.pre", "hc_attn.post", "hc_attn.comb", "attn_in", "q", "kv", "attn_o",
                            "attn_out", "hc_ffn.pre", "hc_ffn.post", "hc_ffn.comb", "ffn_in", "gate.weights",
                            "gate.indices", "moe_out", "out"}) {
        const std::string name = "L" + std::to_string(l) + "." + phase + "." + n;
        const TensorInfo* got = dumped.find(name);
        ASSERT_NE(got, nullptr) << name << " missing from the dump";
        EXPECT_EQ(got->shape, ops.get(name).shape) << name;
        ++compared;
      }
  for (const char* name : {"L1.prefill.compressed_kv", "L3.prefill.indexer.compressed_kv", "head.prefill.hc_head_y",
                           "head.decode.normed", "mtp.prefill.x_in", "mtp.decode.out", "mtp.decode.normed"}) {
    ASSERT_NE(dumped.find(name), nullptr) << name;
    EXPECT_EQ(dumped.get(name).shape, ops.get(name).shape) << name;
  }
  EXPECT_EQ(compared, 2 * 4 * 17);
}

TEST(ScoreCommand, TokensFileAndErrors) {
  const auto dir = test::scratch_dir("score-errors");
  {
    std::ofstream f(dir / "tokens.txt");
    f << "0\n5\n\n17\n99\n";
  }
  const std::string model = " --model " + test::tiny_a_dir().string();
  auto ok = test::run_cli("score" + model + " --tokens-file " + (dir / "tokens.txt").string() + " --prompt-len 2");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  // Four tokens (the blank line skipped) with a prompt of 2 score positions 2..3.
  EXPECT_NE(ok.out.find("perplexity over positions 2..3:"), std::string::npos) << ok.out;
  auto bad_id = test::run_cli("score" + model + " --tokens 0,5,4096 --prompt-len 1");
  EXPECT_EQ(bad_id.exit_code, 1) << bad_id.out;
  EXPECT_NE(bad_id.out.find("4096"), std::string::npos) << bad_id.out;
  auto bad_len = test::run_cli("score" + model + " --tokens 0,5 --prompt-len 3");
  EXPECT_EQ(bad_len.exit_code, 1);
  EXPECT_NE(bad_len.out.find("--prompt-len"), std::string::npos) << bad_len.out;
  auto no_model = test::run_cli("score --model " + (dir / "nothing").string() + " --tokens 0 --prompt-len 1");
  EXPECT_EQ(no_model.exit_code, 1);
  EXPECT_NE(no_model.out.find("nothing"), std::string::npos) << no_model.out;
}

TEST(GenerateCommand, JsonOutputPlainAndSpeculative) {
  const std::string base = "generate --model " + test::tiny_a_dir().string() +
                           " --prompt-tokens 0,5,17,99 --max-new-tokens 24 --json --ignore-eos";
  auto plain = test::run_cli(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  auto j0 = nlohmann::json::parse(plain.out);
  ASSERT_EQ(j0["tokens"].size(), 24u);
  EXPECT_GT(j0["prefill_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(j0["decode_tokens_per_s"].get<double>(), 0);
  auto spec = test::run_cli(base + " --draft 3 --mtp-vocab 512");
  ASSERT_EQ(spec.exit_code, 0) << spec.out;
  auto j3 = nlohmann::json::parse(spec.out);
  EXPECT_EQ(j3["tokens"], j0["tokens"]);
  for (const char* key : {"drafted", "accepted", "acceptance_by_position", "mean_accepted_length"})
    EXPECT_TRUE(j3.contains(key)) << key;
  EXPECT_EQ(j3["acceptance_by_position"].size(), 3u);
  EXPECT_GT(j3["drafted"].get<int64_t>(), 0);
  // The default, auto: this head has whole groups of 256 columns, so int2 where the backend has an
  // INT2 kernel (CPUs with vdpbf16ps), int4 elsewhere.
  WeightView head;
  head.format = WeightFormat::BF16;
  head.rows = 512;
  head.cols = 256;
  const bool int2_kernel = test::make_test_backend()->has_kernel_for(int2_copy_geometry(head));
  EXPECT_EQ(j3["draft_head"], int2_kernel ? "int2" : "int4");
  // Drafting with the target's head or a rounded copy of the (limited) head, rescored: the same
  // tokens and drafts.
  for (const char* format : {"target", "fp8", "int4", "int2"}) {
    auto copy = test::run_cli(base + " --draft 3 --mtp-vocab 512 --draft-head " + format);
    ASSERT_EQ(copy.exit_code, 0) << copy.out;
    auto jc = nlohmann::json::parse(copy.out);
    EXPECT_EQ(jc["tokens"], j0["tokens"]) << format;
    EXPECT_EQ(jc["draft_head"], format);
    EXPECT_EQ(jc["drafted"], j3["drafted"]) << format;
    EXPECT_EQ(jc["accepted"], j3["accepted"]) << format;
  }
  auto bad = test::run_cli(base + " --draft 3 --draft-head fp16");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("int4"), std::string::npos) << bad.out;
  // Pages mapped on first use instead of at open: the same output.
  auto lazy = test::run_cli(base + " --no-prefault");
  ASSERT_EQ(lazy.exit_code, 0) << lazy.out;
  EXPECT_EQ(nlohmann::json::parse(lazy.out)["tokens"], j0["tokens"]);
}

TEST(GenerateCommand, PromptTokensFromAFileOrStandardInput) {
  const std::string model = " --model " + test::tiny_a_dir().string() + " --max-new-tokens 12 --json --ignore-eos";
  auto args = test::run_cli("generate" + model + " --prompt-tokens 0,5,17,99,3");
  ASSERT_EQ(args.exit_code, 0) << args.out;
  const auto expected = nlohmann::json::parse(args.out)["tokens"];
  ASSERT_EQ(expected.size(), 12u);
  const auto file = test::scratch_dir("prompt-file") / "prompt.txt";
  std::ofstream(file) << "0\n5\n\n17\n99\n3\n";
  auto from_file = test::run_cli("generate" + model + " --prompt-tokens-file " + file.string());
  ASSERT_EQ(from_file.exit_code, 0) << from_file.out;
  EXPECT_EQ(nlohmann::json::parse(from_file.out)["tokens"], expected);
  auto from_stdin = test::run_shell("printf '0\\n5\\n17\\n99\\n3\\n' | " + std::string(DSV4_CLI) + " generate" + model +
                                    " --prompt-tokens-file -");
  ASSERT_EQ(from_stdin.exit_code, 0) << from_stdin.out;
  EXPECT_EQ(nlohmann::json::parse(from_stdin.out)["tokens"], expected);
  std::ofstream(file) << "0\n5\nseventeen\n";
  auto bad = test::run_cli("generate" + model + " --prompt-tokens-file " + file.string());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("prompt.txt:3"), std::string::npos) << bad.out;
}

// --backend picks the backend: the reference backend's greedy tokens equal the CPU backend's on
// tiny-a (both within the golden tolerances; here the argmax never sits on a near tie), with
// drafts too; an unknown backend is refused with the choices.
TEST(GenerateCommand, BackendOption) {
  const std::string model = " --model " + test::tiny_a_dir().string() +
                            " --prompt-tokens 0,5,17,99,3 --max-new-tokens 10 --json --ignore-eos";
  auto cpu = test::run_cli("generate" + model + " --backend cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.out;
  auto reference = test::run_cli("generate" + model + " --backend reference --draft 2");
  ASSERT_EQ(reference.exit_code, 0) << reference.out;
  const auto ref_json = nlohmann::json::parse(reference.out);
  EXPECT_EQ(ref_json["tokens"], nlohmann::json::parse(cpu.out)["tokens"]);
  EXPECT_GT(ref_json["drafted"].get<int64_t>(), 0);
  EXPECT_EQ(ref_json["backend"], "reference");  // the path named ran
  EXPECT_EQ(nlohmann::json::parse(cpu.out)["backend"], "cpu");
  auto unknown = test::run_cli("generate" + model + " --backend gpu");
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.out.find("gpu not in {cpu,reference}"), std::string::npos) << unknown.out;
}

TEST(GenerateCommand, ClearErrors) {
  const std::string model = " --model " + test::tiny_a_dir().string();
  auto unknown = test::run_cli("generate" + model + " --prompt-tokens 0,5,1024");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.out.find("1024"), std::string::npos) << unknown.out;
  auto empty = test::run_cli("generate" + model + " --prompt-tokens ''");
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_NE(empty.out.find("empty"), std::string::npos) << empty.out;
  std::string long_prompt = "0";
  for (int i = 1; i < 600; ++i) long_prompt += "," + std::to_string(i % 1000);
  auto too_long = test::run_cli("generate" + model + " --prompt-tokens " + long_prompt);
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_NE(too_long.out.find("context limit"), std::string::npos) << too_long.out;
  const auto dir = test::scratch_dir("no-mtp");
  auto made = test::run_cli("make-checkpoint --preset tiny --seed 2 --no-mtp --quiet --out " + dir.string());
  ASSERT_EQ(made.exit_code, 0) << made.out;
  // Without the MTP module the target decodes alone, and says so once.
  auto draft = test::run_cli("generate --model " + dir.string() + " --prompt-tokens 0,1,2 --max-new-tokens 4 --draft 2");
  EXPECT_EQ(draft.exit_code, 0) << draft.out;
  const std::string note =
      "has no drafter (no mtp.0.* tensors: neither an MTP module nor DSpark stages): speculative decoding is off";
  const size_t at = draft.out.find(note);
  EXPECT_NE(at, std::string::npos) << draft.out;
  EXPECT_EQ(draft.out.find(note, at + 1), std::string::npos) << "said more than once: " << draft.out;
  auto plain = test::run_cli("generate --model " + dir.string() + " --prompt-tokens 0,1,2 --max-new-tokens 4");
  EXPECT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_EQ(plain.out.find(note), std::string::npos) << plain.out;
}

}  // namespace
}  // namespace dsv4

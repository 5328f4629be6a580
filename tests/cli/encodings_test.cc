// Checkpoint encodings end to end: `make-checkpoint --encoding` writes the same tiny random model
// in each encoding; each loads (encoding detected per tensor, either naming family), `inspect`
// names each module group's encoding and the bytes a decode step reads, logits and greedy tokens
// agree with the release encoding's as far as the math allows, speculative greedy equals plain
// greedy, and bad tensors fail with messages naming the tensor, the file, what was found and what
// was expected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors_writer.h"
#include "core/number_formats.h"
#include "io/safetensors.h"
#include "cli/encodings_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

using namespace encodings;

// Bytes of the routed experts one decode step reads per token (tiny: 4 layers, 2 of 8 experts,
// D = 256, intermediate 128), per encoding of w1, w2, w3: from the formats' definitions.
constexpr double kExpertValues = 3.0 * 128 * 256;           // values of one expert
constexpr double kRoutedTokens = 4.0 * 2;                   // layers x experts per token
constexpr double kFp4PerToken = kRoutedTokens * (kExpertValues / 2 + kExpertValues / 32);
constexpr double kFp8PerToken = kRoutedTokens * (kExpertValues + 3 * 2);  // 2 tiles of 128x128 per weight
constexpr double kBf16PerToken = kRoutedTokens * kExpertValues * 2;
constexpr double kNvfp4PerToken = kRoutedTokens * (kExpertValues / 2 + kExpertValues / 16);

TEST(Encodings, EachLoadsAndInspectShowsItsEncoding) {
  const json release = inspect(make_encoded("enc_inspect", "release"));
  const json bf16 = inspect(make_encoded("enc_inspect", "bf16"));
  const json hf = inspect(make_encoded("enc_inspect", "hf-bf16"));
  const json fp8 = inspect(make_encoded("enc_inspect", "fp8-experts"));
  const json nvfp4 = inspect(make_encoded("enc_inspect", "nvfp4"));
  const json ct = inspect(make_encoded("enc_inspect", "ct-nvfp4"));
  const json ct_fp8 = inspect(make_encoded("enc_inspect", "ct-fp8"));
  const json int4 = inspect(make_encoded("enc_inspect", "ct-int4"));
  for (const json* r : {&release, &bf16, &hf, &fp8, &nvfp4, &ct, &ct_fp8, &int4}) {
    EXPECT_TRUE((*r)["complete"].get<bool>()) << r->dump();
    EXPECT_TRUE((*r)["mtp_present"].get<bool>());
  }
  // The same model: as many parameters in every encoding (packed 4-bit values counted singly, scales
  // not counted), but for the MTP copies of embed and head that compressed-tensors adds.
  for (const json* r : {&bf16, &hf, &fp8, &nvfp4, &ct_fp8}) EXPECT_EQ((*r)["parameters"], release["parameters"]);
  const int64_t copies = 2 * 1024 * 256;  // embed and head, vocabulary 1024 x hidden 256
  EXPECT_EQ(ct["parameters"].get<int64_t>(), release["parameters"].get<int64_t>() + copies);
  EXPECT_EQ(int4["parameters"].get<int64_t>(), release["parameters"].get<int64_t>() + copies);
  EXPECT_EQ(release["naming"], "release");
  EXPECT_EQ(bf16["naming"], "release");
  EXPECT_EQ(hf["naming"], "hf");
  EXPECT_EQ(fp8["naming"], "release");
  EXPECT_EQ(ct["naming"], "release");  // (its gate bias under the HF name e_score_correction_bias)
  EXPECT_EQ(module(release, "routed experts")["encoding"], "FP4 100%");
  EXPECT_EQ(module(fp8, "routed experts")["encoding"], "FP8 100%");
  EXPECT_EQ(module(bf16, "routed experts")["encoding"], "BF16 100%");
  EXPECT_EQ(module(hf, "routed experts")["encoding"], "BF16 100%");
  EXPECT_EQ(module(release, "routed experts")["bytes_per_token"].get<double>(), kFp4PerToken);
  EXPECT_EQ(module(fp8, "routed experts")["bytes_per_token"].get<double>(), kFp8PerToken);
  EXPECT_EQ(module(bf16, "routed experts")["bytes_per_token"].get<double>(), kBf16PerToken);
  // NVFP4: the target's experts; ModelOpt keeps the MTP's in MXFP4, compressed-tensors the MTP in BF16
  // (with copies of embed and head, allowed and unused).
  EXPECT_EQ(module(nvfp4, "routed experts")["encoding"], "NVFP4 100%");
  EXPECT_EQ(module(ct, "routed experts")["encoding"], "NVFP4 100%");
  EXPECT_EQ(module(nvfp4, "routed experts")["bytes_per_token"].get<double>(), kNvfp4PerToken);
  EXPECT_TRUE(module(nvfp4, "MTP")["format_bytes"].contains("FP4"));
  EXPECT_FALSE(module(ct, "MTP")["format_bytes"].contains("FP8"));
  EXPECT_FALSE(module(ct, "MTP")["format_bytes"].contains("FP4"));
  EXPECT_EQ(ct["aliases"], json::array({"mtp.0.emb.tok_emb.weight", "mtp.0.head.weight"}));
  EXPECT_TRUE(nvfp4["aliases"].empty());
  // compressed-tensors FP8 blocks: the attention's FP8 weights with F32 multipliers (4 bytes per tile).
  const json attention_fp8 = module(release, "target attention")["format_bytes"];
  const json attention_fp8f = module(ct_fp8, "target attention")["format_bytes"];
  EXPECT_FALSE(attention_fp8f.contains("FP8"));
  EXPECT_GT(attention_fp8f.value("FP8F", 0), attention_fp8.value("FP8", 0));
  // compressed-tensors W4A16: INT4 experts (BF16 scale per 128), BF16 shared experts, an F32 head.
  EXPECT_EQ(module(int4, "routed experts")["encoding"], "INT4 100%");
  EXPECT_EQ(module(int4, "routed experts")["bytes_per_token"].get<double>(),
            kRoutedTokens * (kExpertValues / 2 + kExpertValues / 128 * 2));
  EXPECT_EQ(module(int4, "shared experts")["encoding"], "BF16 100%");
  EXPECT_EQ(module(int4, "head")["encoding"].get<std::string>().substr(0, 8), "F32 100%");  // (+ BF16 norm <1%)
  // Attention: FP8 tiles in the release, none left in the BF16 conversions.
  EXPECT_NE(module(release, "target attention")["format_bytes"].value("FP8", 0), 0);
  EXPECT_FALSE(module(bf16, "target attention")["format_bytes"].contains("FP8"));
  EXPECT_FALSE(module(hf, "MTP")["format_bytes"].contains("FP8"));
  EXPECT_GT(bf16["decode_bytes_per_token"].get<double>(), release["decode_bytes_per_token"].get<double>());
  // The HF conversion differs only in names, config dialect and F32 norms.
  EXPECT_EQ(hf["config"], bf16["config"]);
  EXPECT_EQ(module(hf, "shared experts")["format_bytes"]["BF16"], module(bf16, "shared experts")["format_bytes"]["BF16"]);
}

// Same values, same kernels: the HF-named BF16 checkpoint is the BF16 one bit for bit (F32 norms
// hold the same values as the BF16 ones, and rms_norm reads both exactly).
TEST(Encodings, HfNamesGiveTheSameBitsAsReleaseNames) {
  const auto bf16 = logits(make_encoded("enc_hf", "bf16"));
  const auto hf = logits(make_encoded("enc_hf", "hf-bf16"));
  EXPECT_TRUE(bf16.first == hf.first) << "target logits differ";
  EXPECT_TRUE(bf16.second == hf.second) << "MTP logits differ";
}

// MXFP4 -> FP8 tiles holds every weight exactly, but the products are summed in another order
// (per 32-wide block times its scale for FP4; per 128-wide tile for FP8), so fp32 rounding may
// differ, and a bf16 rounding that flips by one unit (2^-8 relative) propagates. Bound: 2e-3
// relative L2 per logit row, a tenth of what skipping the activation quantization does (see
// Bf16IsCloseToTheRelease); greedy tokens equal. (On the tiny model the sums happen to be exact:
// the logits come out bit-identical.)
TEST(Encodings, Fp8ExpertsAgreeWithTheRelease) {
  const fs::path release = make_encoded("enc_fp8", "release"), fp8 = make_encoded("enc_fp8", "fp8-experts");
  const auto a = logits(release), b = logits(fp8);
  EXPECT_LT(max_row_rel_l2(a.first, b.first), 2e-3);
  EXPECT_LT(max_row_rel_l2(a.second, b.second), 2e-3);
  EXPECT_EQ(generate(release, 0)["tokens"], generate(fp8, 0)["tokens"]);
}

// BF16 weights hold the release's values exactly, but a BF16 linear layer does not quantize its
// activations to e4m3 per 128 (the reference quantizes them for FP8/FP4 weights only): each
// product sees inputs changed by up to 2^-4 relative, so the logits differ by a few percent (2-3%
// on this model). The bound (0.1 relative L2 per row) is that, with room; a BF16 model that
// misread weights (wrong scale, wrong layout) is off by order 1.
TEST(Encodings, Bf16IsCloseToTheRelease) {
  const auto a = logits(make_encoded("enc_bf16", "release")), b = logits(make_encoded("enc_bf16", "bf16"));
  const double target = max_row_rel_l2(a.first, b.first), mtp = max_row_rel_l2(a.second, b.second);
  EXPECT_LT(target, 0.1);
  EXPECT_LT(mtp, 0.1);
  EXPECT_GT(target, 0.0);  // the activations were not quantized
}

// NVFP4 holds the MXFP4 experts' values exactly (E4M3 block scales of powers of two, a power-of-two
// global scale); the products are summed per 16-wide block instead of per 32-wide one: the bound of
// Fp8ExpertsAgreeWithTheRelease (also for ct-fp8: the same FP8 values with F32 multipliers).
// compressed-tensors' MTP is BF16: its logits differ from the release's as Bf16IsCloseToTheRelease
// explains.
TEST(Encodings, Nvfp4AgreesWithTheRelease) {
  const fs::path release = make_encoded("enc_nvfp4", "release");
  const auto a = logits(release);
  const json tokens = generate(release, 0)["tokens"];
  for (const char* encoding : {"nvfp4", "ct-nvfp4", "ct-fp8"}) {
    const fs::path dir = make_encoded("enc_nvfp4", encoding);
    const auto b = logits(dir);
    EXPECT_LT(max_row_rel_l2(a.first, b.first), 2e-3) << encoding;
    EXPECT_LT(max_row_rel_l2(a.second, b.second), encoding == std::string("ct-nvfp4") ? 0.1 : 2e-3) << encoding;
    EXPECT_EQ(generate(dir, 0)["tokens"], tokens) << encoding;
  }
}

// INT4 cannot hold the MXFP4 experts' values: each is rounded to the nearest of 16 levels of its
// group's scale (amax/7), an error of up to amax/14 per weight, on top of the BF16 MTP's and shared
// experts' difference (Bf16IsCloseToTheRelease): 6-9% here. Bound: 0.2 relative L2 per row; a
// misread packing (nibble order, the -8 offset, the scale) is off by order 1.
TEST(Encodings, Int4IsCloseToTheRelease) {
  const auto a = logits(make_encoded("enc_int4", "release")), b = logits(make_encoded("enc_int4", "ct-int4"));
  const double target = max_row_rel_l2(a.first, b.first);
  EXPECT_LT(target, 0.2);
  EXPECT_GT(target, 0.0);
  EXPECT_LT(max_row_rel_l2(a.second, b.second), 0.2);
}

// Speculative greedy equals plain greedy whatever the encoding.
TEST(Encodings, SpeculativeGreedyEqualsPlainGreedy) {
  for (const char* encoding : {"bf16", "hf-bf16", "fp8-experts", "nvfp4", "ct-nvfp4", "ct-fp8", "ct-int4"}) {
    const fs::path dir = make_encoded("enc_spec", encoding);
    const json plain = generate(dir, 0), spec = generate(dir, 2);
    EXPECT_EQ(plain["tokens"], spec["tokens"]) << encoding;
    EXPECT_GT(spec["drafted"].get<int64_t>(), 0) << encoding;
  }
}

TEST(Encodings, HfCheckpointWithoutMtp) {
  const fs::path dir = make_encoded("enc_nomtp", "hf-bf16", " --no-mtp");
  const json report = inspect(dir);
  EXPECT_FALSE(report["mtp_present"].get<bool>());
  const json plain = generate(dir, 0), spec = generate(dir, 2);
  EXPECT_EQ(plain["tokens"], spec["tokens"]);
  EXPECT_EQ(spec["drafted"], 0);
  EXPECT_EQ(spec["draft"], 0);  // said once on stderr, speculation off
}

// ---- bad input ------------------------------------------------------------------------

// compressed-tensors keeps the MTP in BF16 beside an NVFP4 / FP8 target: on the partial-acceptance
// preset it drafts with the release's acceptance (the same weights; only its activations are not
// quantized), and speculation keeps the greedy output.
TEST(Encodings, Bf16MtpDraftsWithTheReleasesAcceptance) {
  auto run = [](const std::string& encoding) {
    const fs::path dir = test::scratch_dir("enc_mirror_" + encoding);
    const auto made = test::run_cli("make-checkpoint --quiet --preset mirror --seed 4 --encoding " + encoding +
                                    " --out " + dir.string());
    EXPECT_EQ(made.exit_code, 0) << made.out;
    auto gen = [&](int draft) {
      const auto r = test::run_cli("generate --model " + dir.string() + " --prompt-tokens " + kTokens +
                                   " --max-new-tokens 96 --ignore-eos --json --draft " + std::to_string(draft));
      EXPECT_EQ(r.exit_code, 0) << r.out;
      return json::parse(r.out.substr(r.out.find('{')));
    };
    const json spec = gen(2);
    EXPECT_EQ(spec["tokens"], gen(0)["tokens"]) << encoding;
    const double drafted = spec["drafted"].get<double>();
    EXPECT_GT(drafted, 40) << encoding;
    return spec["accepted"].get<double>() / drafted;
  };
  const double release = run("release"), bf16_mtp = run("ct-nvfp4");
  std::printf("acceptance: release %.3f, ct-nvfp4 (BF16 MTP) %.3f\n", release, bf16_mtp);
  EXPECT_GT(release, 0.2);  // partial acceptance: the preset's point
  EXPECT_LT(release, 0.98);
  EXPECT_NEAR(bf16_mtp, release, 0.05);
}

// Hyper-connection, ape, attention-sink and gate-bias vectors stored in BF16 (as conversions that
// store every tensor in BF16 do) load widened to F32: the logits equal, bit for bit, those of F32
// tensors holding the same bf16-rounded values. (A BF16 vector read as F32 bytes would be garbage.)
TEST(Encodings, Bf16VectorsWhereTheReleaseHasF32) {
  const fs::path release = make_encoded("enc_vec", "release");
  const std::vector<std::string> kinds = {"hc_", ".ape", "attn_sink", "gate.bias"};
  auto kind_of = [&](const StoredTensor& t) -> int {
    if (t.dtype != DType::F32) return -1;
    for (size_t k = 0; k < kinds.size(); ++k)
      if (t.name.find(kinds[k]) != std::string::npos) return int(k);
    return -1;
  };
  std::vector<int> converted(kinds.size(), 0);
  auto edit = [&](bool to_bf16) {
    return [&, to_bf16](std::vector<StoredTensor>& ts) {
      for (StoredTensor& t : ts) {
        const int k = kind_of(t);
        if (k < 0) continue;
        const size_t n = t.bytes.size() / 4;
        std::vector<uint8_t> out(to_bf16 ? n * 2 : n * 4);
        for (size_t i = 0; i < n; ++i) {
          float v;
          std::memcpy(&v, t.bytes.data() + 4 * i, 4);
          const uint16_t h = f32_to_bf16(v);
          if (to_bf16) {
            std::memcpy(out.data() + 2 * i, &h, 2);
          } else {
            const float r = bf16_to_f32(h);
            std::memcpy(out.data() + 4 * i, &r, 4);
          }
        }
        t.bytes = std::move(out);
        if (to_bf16) {
          t.dtype = DType::BF16;
          ++converted[size_t(k)];
        }
      }
    };
  };
  const fs::path f32 = edited_copy(release, "enc_vec_f32", edit(false));
  const fs::path bf16 = edited_copy(release, "enc_vec_bf16", edit(true));
  for (size_t k = 0; k < kinds.size(); ++k) EXPECT_GT(converted[k], 0) << "no " << kinds[k] << " tensor converted";
  const auto a = logits(f32), b = logits(bf16);
  ASSERT_FALSE(a.first.empty());
  EXPECT_TRUE(a.first == b.first) << "target logits differ";
  EXPECT_TRUE(a.second == b.second) << "MTP logits differ";
}

// FP8 blocks whose float multipliers are stored in BF16 (one compressed-tensors recipe) or F16 run
// as FP8 with F32 multipliers (widened at load): ct-fp8's scales are powers of two, exact in both,
// so the logits equal ct-fp8's bit for bit — and a wrong reading (the bytes as F32) would not.
TEST(Encodings, Fp8WithHalfPrecisionScales) {
  const fs::path ct = make_encoded("enc_fp8_half", "ct-fp8");
  const auto expected = logits(ct);
  for (DType half : {DType::BF16, DType::F16}) {
    int converted = 0;
    const fs::path dir = edited_copy(ct, "enc_fp8_half_" + std::string(dtype_name(half)), [&](auto& ts) {
      for (StoredTensor& t : ts) {
        if (t.dtype != DType::F32 || !t.name.ends_with(".weight_scale")) continue;
        std::vector<uint8_t> out(t.bytes.size() / 2);
        for (size_t i = 0; i < out.size() / 2; ++i) {
          float v;
          std::memcpy(&v, t.bytes.data() + 4 * i, 4);
          const uint16_t h = half == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
          std::memcpy(out.data() + 2 * i, &h, 2);
        }
        t.bytes = std::move(out);
        t.dtype = half;
        ++converted;
      }
    });
    EXPECT_GT(converted, 10) << dtype_name(half);
    const auto got = logits(dir);
    EXPECT_TRUE(got.first == expected.first) << dtype_name(half) << ": target logits differ";
    EXPECT_TRUE(got.second == expected.second) << dtype_name(half) << ": MTP logits differ";
  }
}

TEST(Encodings, BadInputIsNamed) {
  const fs::path release = make_encoded("enc_bad", "release"), bf16 = make_encoded("enc_bad", "bf16");
  const std::string file = "model.safetensors";
  const std::string scale = "layers.0.attn.wq_a.scale";  // [1, 2] E8M0 of a [128, 256] FP8 weight

  // A scale of the wrong shape (same bytes).
  fs::path dir = edited_copy(release, "enc_bad_scale_shape", [&](auto& ts) { find(ts, scale).shape = {2, 1}; });
  expect_load_error(dir, {file, scale, "shape [2, 1], expected [1, 2]", "128x128 tile", "[128, 256]"});

  // A scale of the wrong dtype.
  dir = edited_copy(release, "enc_bad_scale_dtype", [&](auto& ts) { find(ts, scale).dtype = DType::U8; });
  expect_load_error(dir, {file, scale, "dtype U8, expected F8_E8M0"});

  // A missing companion.
  dir = edited_copy(release, "enc_bad_no_scale", [&](auto& ts) {
    std::erase_if(ts, [&](const StoredTensor& t) { return t.name == scale; });
  });
  expect_load_error(dir, {file, "layers.0.attn.wq_a.weight", "F8_E4M3 codes without their scale", scale, "[1, 2]"});

  // Encodings recognized but not run (yet), and companions that fit no encoding.
  dir = edited_copy(release, "enc_bad_int4", [&](auto& ts) {
    StoredTensor& codes = find(ts, "layers.1.ffn.experts.3.w2.weight");
    codes.name = "layers.1.ffn.experts.3.w2.weight_packed";
    codes.dtype = DType::I32;
    codes.shape = {codes.shape[0], codes.shape[1] / 4};
    ts.push_back({"layers.1.ffn.experts.3.w2.weight_shape", DType::I64, {2}, std::vector<uint8_t>(16, 0)});
  });
  expect_load_error(dir, {file, "layers.1.ffn.experts.3.w2.weight_packed", "INT4 codes without their scales",
                          "layers.1.ffn.experts.3.w2.weight_scale' BF16, F16 or F32 [256, 1]"});
  const fs::path int4 = make_encoded("enc_bad", "ct-int4");
  dir = edited_copy(int4, "enc_bad_int4_shape", [&](auto& ts) {
    find(ts, "layers.1.ffn.experts.3.w2.weight_shape").bytes[0] = 7;  // 263 rows: the weight has 256
  });
  expect_load_error(dir, {file, "layers.1.ffn.experts.3.w2.weight_shape", "does not hold [256, 128]"});
  // W4A16-FP8: a compressor's FP8 block scale of the wrong shape, and one missing.
  dir = edited_copy(int4, "enc_bad_compressor_scale", [&](auto& ts) {
    StoredTensor& s = find(ts, "layers.1.attn.compressor.wkv.weight_scale");
    s.shape = {4, 1};
  });
  expect_load_error(dir, {file, "layers.1.attn.compressor.wkv.weight_scale", "shape [4, 1], expected [2, 2]",
                          "scale per 128x128 tile", "[256, 256]"});
  dir = edited_copy(int4, "enc_bad_indexer_scale", [&](auto& ts) {
    std::erase_if(ts, [](const StoredTensor& t) { return t.name == "layers.3.attn.indexer.weights_proj.weight_scale"; });
  });
  expect_load_error(dir, {file, "layers.3.attn.indexer.weights_proj.weight", "F8_E4M3 codes without their scale"});
  dir = edited_copy(release, "enc_bad_fp8_bf16_scale", [&](auto& ts) {
    StoredTensor& s = find(ts, scale);
    s.name = "layers.0.attn.wq_a.weight_scale";
    s.dtype = DType::BF16;
    s.shape = {1, 1};
    s.bytes.assign(2, 0);
  });
  expect_load_error(dir, {file, "layers.0.attn.wq_a.weight_scale", "shape [1, 1], expected [1, 2]", "128x128 tile"});
  dir = edited_copy(release, "enc_bad_fp8_i8_scale", [&](auto& ts) {
    StoredTensor& s = find(ts, scale);
    s.name = "layers.0.attn.wq_a.weight_scale";
    s.dtype = DType::I8;
  });
  expect_load_error(dir, {file, "layers.0.attn.wq_a.weight_scale", "dtype I8, expected F32, BF16 or F16"});
  dir = edited_copy(release, "enc_bad_fp8_f32_scale_shape", [&](auto& ts) {
    StoredTensor& s = find(ts, scale);
    s.name = "layers.0.attn.wq_a.weight_scale";
    s.dtype = DType::F32;
    s.shape = {1, 1};
    s.bytes.assign(4, 0);
  });
  expect_load_error(dir, {file, "layers.0.attn.wq_a.weight_scale", "shape [1, 1], expected [1, 2]", "scale per 128x128 tile"});
  // NVFP4 (ModelOpt) without its global scale, and with a block scale of the wrong dtype.
  const fs::path nvfp4 = make_encoded("enc_bad", "nvfp4");
  const std::string expert = "layers.1.ffn.experts.3.w2";
  dir = edited_copy(nvfp4, "enc_bad_nvfp4_global", [&](auto& ts) {
    std::erase_if(ts, [&](const StoredTensor& t) { return t.name == expert + ".weight_scale_2"; });
  });
  expect_load_error(dir, {file, expert + ".weight", "NVFP4 codes without their global scale", expert + ".weight_scale_2"});
  dir = edited_copy(nvfp4, "enc_bad_nvfp4_scale", [&](auto& ts) { find(ts, expert + ".weight_scale").dtype = DType::U8; });
  expect_load_error(dir, {file, expert + ".weight_scale", "dtype U8, expected F8_E4M3"});
  dir = edited_copy(bf16, "enc_bad_companion", [&](auto& ts) {
    ts.push_back({"layers.0.attn.wkv.weight_scale", DType::F32, {1, 2}, std::vector<uint8_t>(8, 0)});
  });
  expect_load_error(dir, {file, "layers.0.attn.wkv.weight", "dtype BF16 beside the scale 'layers.0.attn.wkv.weight_scale'"});
  dir = edited_copy(bf16, "enc_bad_dtype", [&](auto& ts) { find(ts, "layers.2.attn.wo_b.weight").dtype = DType::I16; });
  expect_load_error(dir, {file, "layers.2.attn.wo_b.weight", "dtype I16", "expected BF16, F32"});

  // A BF16 MTP whose shapes disagree with the target's.
  dir = edited_copy(bf16, "enc_bad_mtp", [&](auto& ts) { find(ts, "mtp.0.e_proj.weight").shape = {128, 512}; });
  expect_load_error(dir, {file, "mtp.0.e_proj.weight", "shape [128, 512], expected [256, 256]"});

  // Routed experts of one layer in two encodings: expert 0 of layer 1 in BF16 among FP4 ones.
  dir = edited_copy(release, "enc_bad_mixed", [&](auto& ts) {
    for (const char* w : {"w1", "w2", "w3"}) {
      const std::string p = std::string("layers.1.ffn.experts.0.") + w;
      StoredTensor& codes = find(ts, p + ".weight");
      codes.dtype = DType::BF16;
      codes.shape[1] *= 2;
      codes.bytes.assign(codes.bytes.size() * 4, 0);
      std::erase_if(ts, [&](const StoredTensor& t) { return t.name == p + ".scale"; });
    }
  });
  expect_load_error(dir, {file, "layers.1.ffn.experts.", "must share one encoding"});

  // An encoding make-checkpoint does not know.
  const auto unknown = test::run_cli("make-checkpoint --quiet --preset tiny --encoding fp3 --out " +
                                     test::scratch_dir("enc_bad_unknown").string());
  EXPECT_EQ(unknown.exit_code, 1) << unknown.out;
  EXPECT_NE(unknown.out.find("unknown encoding 'fp3'; known: release|bf16|hf-bf16|fp8-experts|nvfp4|ct-nvfp4|ct-fp8|ct-int4"),
            std::string::npos) << unknown.out;

  // inspect reports the same problems, all of them, without stopping at the first.
  dir = edited_copy(release, "enc_bad_two", [&](auto& ts) {
    find(ts, scale).dtype = DType::U8;
    find(ts, "layers.1.attn.wq_a.scale").shape = {2, 1};
  });
  const auto r = test::run_cli("inspect " + dir.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("mis-shaped or mis-typed tensors: 2"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace dsv4

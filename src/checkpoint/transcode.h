// Rewrites a release-encoded checkpoint in another encoding users download, value for value:
// `make-checkpoint --encoding` writes the same random model in each of them, so that each
// encoding's loader and kernels can be checked against the release's.
//
//   release      FP8 e4m3 + E8M0 128x128 tiles, MXFP4 routed experts, release names (no change)
//   bf16         release names, every FP8/FP4 weight dequantized to BF16 and its .scale dropped,
//                no quantization_config (a "BF16 conversion")
//   hf-bf16      bf16 with Hugging Face transformers names, norms in F32 and the HF config dialect
//   fp8-experts  routed experts recast from MXFP4 to FP8 e4m3 with one E8M0 per 128x128 tile
//                (the release's own --expert-dtype fp8 recast); everything else unchanged
//   nvfp4        NVIDIA ModelOpt: the target's routed experts as NVFP4 (weight U8, weight_scale
//                E4M3 per 16, weight_scale_2, input_scale; hf_quant_config.json); the MTP and
//                everything else in the release encoding
//   ct-nvfp4     compressed-tensors: the target's routed experts as NVFP4 (weight_packed,
//                weight_scale, weight_global_scale = the inverse), the MTP in BF16 with copies of
//                embed and head (mtp.0.emb.tok_emb.weight, mtp.0.head.weight), the gate bias named
//                e_score_correction_bias, a compressed-tensors quantization_config
//   ct-fp8       compressed-tensors FP8 blocks: every FP8 weight's E8M0 .scale as an F32
//                weight_scale multiplier; the routed experts as ct-nvfp4; everything else as stored
//   ct-int4      compressed-tensors W4A16 (canada-quant's layout): the target's routed experts as
//                INT4 (weight_packed I32, weight_scale BF16 per 128, weight_shape), FP8 weights with
//                F32 weight_scale, shared experts and the MTP in BF16 (with the embed/head copies),
//                the head in F32. LOSSY: INT4 cannot hold e2m1 x 2^s exactly; each group of 128 is
//                rounded to nearest with scale = bf16(amax / 7), symmetric, as GPTQ's RTN start
//
// A DSpark drafter (V4-Flash-0731's mtp.0-2 stages) goes where the MTP module goes: BF16 in ct-nvfp4
// and ct-int4 (without embed/head copies: its loaders use the target's), FP8 with F32 scales and
// MXFP4 experts in ct-fp8, the release encoding in nvfp4, FP8 experts in fp8-experts; its Markov
// and confidence heads stay BF16 in every encoding (bf16 already), its norms F32 in hf-bf16.
//
// Every transcode but ct-int4 is lossless: an e4m3 or e2m1 code times a power of two is a BF16 value, an
// MXFP4 tile whose 32-wide scales span at most 2^14 is exactly an e4m3 tile, and an MXFP4 tensor
// whose scales span at most 2^17 is exactly NVFP4 with a power-of-two global scale (scales spread
// further would lose bits: the transcode throws then, naming the tensor, rather than write
// different values).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

namespace dsv4 {

enum class CheckpointEncoding { Release, Bf16, HfBf16, Fp8Experts, Nvfp4, CtNvfp4, CtFp8, CtInt4 };

// "release", "bf16", "hf-bf16", "fp8-experts", "nvfp4", "ct-nvfp4", "ct-fp8", "ct-int4"; parse
// throws listing the known names.
CheckpointEncoding parse_checkpoint_encoding(const std::string& name);
const char* checkpoint_encoding_name(CheckpointEncoding e);
std::string checkpoint_encoding_names();  // "release|bf16|...|ct-nvfp4"

struct TranscodeResult {
  uint64_t bytes = 0;  // all files written
  int shards = 0;
  size_t tensors = 0;
};

// Reads the release-named checkpoint `src` and writes it to `out` (config.json, shards, index).
TranscodeResult transcode_checkpoint(const std::filesystem::path& src, const std::filesystem::path& out,
                                     CheckpointEncoding encoding, uint64_t max_shard_bytes, int min_shards);

}  // namespace dsv4

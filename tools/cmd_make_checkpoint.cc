// dsv4 make-checkpoint: deterministic synthetic checkpoints in the release format or another encoding.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/make_checkpoint.h"
#include "checkpoint/presets.h"
#include "commands.h"
#include "core/error.h"
#include "text/tokenizer.h"

namespace dsv4::cli {

namespace {

struct MakeArgs {
  std::string preset = "tiny";
  uint64_t seed = 0;
  std::string out;
  int64_t layers = 0;
  std::string ratios;
  bool no_mtp = false;
  std::string encoding = "release";
  std::vector<std::string> set;
  double perturb = 0.0;
  double mirror_context = 0.0;  // 0: the preset's own
  int threads = 0;
  double shard_gib = 4.0;
  bool quiet = false;
  std::string tokenizer;  // tokenizer.json: vocabulary size and BOS/EOS from it, files copied
};

// A checkpoint that speaks text: the vocabulary is sized from the tokenizer, BOS/EOS come
// from its config, and tokenizer.json (+ tokenizer_config.json beside it) go into the checkpoint.
void use_tokenizer(const std::string& path, MakeCheckpointOptions& o) {
  namespace fs = std::filesystem;
  const fs::path json(path);
  const fs::path config = json.parent_path() / "tokenizer_config.json";
  const auto tok = text::Tokenizer::load(json, fs::exists(config) ? config : fs::path());
  o.changes.set.push_back({"vocab_size", std::to_string(tok.vocab_size())});
  if (tok.bos_id()) o.changes.set.push_back({"bos_token_id", std::to_string(*tok.bos_id())});
  if (tok.eos_id()) o.changes.set.push_back({"eos_token_id", std::to_string(*tok.eos_id())});
}

void copy_tokenizer_files(const std::string& path, const std::string& out) {
  namespace fs = std::filesystem;
  const fs::path json(path);
  fs::copy_file(json, fs::path(out) / "tokenizer.json", fs::copy_options::overwrite_existing);
  const fs::path config = json.parent_path() / "tokenizer_config.json";
  if (fs::exists(config))
    fs::copy_file(config, fs::path(out) / "tokenizer_config.json", fs::copy_options::overwrite_existing);
}

std::string preset_help() {
  std::string s = "preset: ";
  for (const Preset& p : presets()) s += "\n  " + p.name + ": " + p.description;
  return s;
}

void run(const MakeArgs& a, CommandResult& result) {
  MakeCheckpointOptions o;
  o.preset = a.preset;
  o.seed = a.seed;
  o.out = a.out;
  if (a.layers != 0) o.changes.layers = a.layers;
  if (!a.ratios.empty()) o.changes.ratios = parse_ratio_list(a.ratios);
  for (const std::string& s : a.set) o.changes.set.push_back(parse_set_option(s));
  if (!a.tokenizer.empty()) use_tokenizer(a.tokenizer, o);
  o.with_mtp = !a.no_mtp;
  o.encoding = parse_checkpoint_encoding(a.encoding);
  o.perturb = a.perturb;
  if (a.mirror_context != 0.0) {
    const Preset& preset = find_preset(a.preset);
    DSV4_CHECK(preset.weights == WeightKind::Mirror || preset.weights == WeightKind::MirrorDSpark,
               "make-checkpoint: --mirror-context applies to the mirror presets only, not '", a.preset, "'");
    DSV4_CHECK(std::isfinite(a.mirror_context) && a.mirror_context > 0,
               "make-checkpoint: --mirror-context must be positive, got ", a.mirror_context);
    o.mirror.context = float(a.mirror_context);
    o.mirror_dspark.context = float(a.mirror_context);
  }
  o.threads = a.threads;
  DSV4_CHECK(a.shard_gib > 0, "make-checkpoint: --shard-gib must be positive");
  o.max_shard_bytes = uint64_t(a.shard_gib * double(1ull << 30));
  uint64_t next_report = uint64_t(1) << 30;
  if (!a.quiet)
    o.progress = [&next_report](uint64_t done, uint64_t total) {
      if (done < next_report || total < (uint64_t(2) << 30)) return;
      std::fprintf(stderr, "  %.1f / %.1f GB\n", double(done) / 1e9, double(total) / 1e9);
      next_report = done + (uint64_t(1) << 30);
    };

  const MakeCheckpointResult r = make_checkpoint(o);
  if (!a.tokenizer.empty()) copy_tokenizer_files(a.tokenizer, a.out);
  const std::string drafter = r.config.has_dspark()
                                  ? (a.no_mtp ? std::string("no DSpark drafter")
                                              : cat("a ", r.config.num_drafter_layers(), "-stage DSpark drafter"))
                                  : std::string(a.no_mtp ? "no MTP" : "MTP");
  if (!a.quiet)
    std::printf("wrote %s: preset %s, encoding %s, seed %llu, %lld layers + %s, %zu tensors in %d shards, %.3f GB in "
                "%.2f s (%.2f GB/s)\n",
                a.out.c_str(), a.preset.c_str(), a.encoding.c_str(), static_cast<unsigned long long>(a.seed),
                static_cast<long long>(r.config.num_hidden_layers), drafter.c_str(), r.tensors, r.shards,
                double(r.bytes) / 1e9, r.seconds, double(r.bytes) / 1e9 / std::max(r.seconds, 1e-9));
  result.exit_code = 0;
}

}  // namespace

void register_make_checkpoint(CLI::App& app, CommandResult& result) {
  auto a = std::make_shared<MakeArgs>();
  auto* cmd = app.add_subcommand(
      "make-checkpoint",
      "Write a deterministic synthetic checkpoint in the release format (config.json, safetensors shards, "
      "model.safetensors.index.json): FP8 weights with power-of-two 128x128 tile scales, FP4 experts with "
      "32-wide scales, exactly as the real checkpoint stores them. Same seed -> byte-identical files, "
      "whatever the thread count.");
  cmd->add_option("--preset", a->preset, preset_help())->capture_default_str();
  cmd->add_option("--seed", a->seed, "random seed")->capture_default_str();
  cmd->add_option("--out", a->out, "output directory (earlier shards/index in it are replaced)")->required();
  cmd->add_option("--layers", a->layers,
                  "target layers N: compress_ratios = the first N entries of the preset's layer pattern "
                  "(repeated if N is longer), plus 0 for each MTP layer or DSpark stage (default: tiny 4, v4-flash 2); "
                  "a DSpark preset taps the last min(3, N) layers unless --set dspark_target_layer_ids=[...]");
  cmd->add_option("--ratios", a->ratios,
                  "the layers' kinds explicitly, e.g. 0,4,128 (0 window only, 4 CSA, 128 HCA); the length "
                  "sets the layer count");
  cmd->add_flag("--no-mtp", a->no_mtp,
                "write no mtp.* tensors (the config keeps num_nextn_predict_layers or the dspark_* keys: the "
                "checkpoint lacks its MTP module or DSpark drafter and runs the target alone)");
  cmd->add_option("--encoding", a->encoding,
                  "how the weights are stored (the same model in each): release (FP8 tiles, MXFP4 experts), "
                  "bf16 (release names, every weight BF16, no scales), hf-bf16 (bf16 with Hugging Face names, F32 "
                  "norms and the HF config keys), fp8-experts (routed experts recast losslessly to FP8 tiles), nvfp4 "
                  "(ModelOpt: the target's routed experts as NVFP4), ct-nvfp4 (compressed-tensors: NVFP4 experts, "
                  "the MTP in BF16 with embed/head copies), ct-fp8 (compressed-tensors: FP8 weights with F32 block scales, "
                  "NVFP4 experts), ct-int4 (compressed-tensors W4A16-FP8: INT4 experts, lossy; FP8 with F32 scales, "
                  "the compressors' and indexer's projections too; BF16 shared experts and MTP, F32 head)")
      ->capture_default_str();
  cmd->add_option("--set", a->set,
                  "override a config key with a JSON value before validation, e.g. --set sliding_window=8 "
                  "--set rope_scaling.factor=8 (repeatable)");
  cmd->add_option("--perturb", a->perturb,
                  "aligned and mirror presets only: degrade the MTP by X: e_proj = I + X*G with G random "
                  "N(0, 1/D) entries (aligned, 0: the MTP predicts exactly the target's token after next; "
                  "~1: its input is mostly noise; mirror: lowers its partial acceptance); mirror-dspark: the "
                  "fraction X of tokens (0..1) whose Markov successor is wrong")
      ->capture_default_str();
  cmd->add_option("--mirror-context", a->mirror_context,
                  "mirror presets: the strength of the target's layer-0 attention (mirror 8, mirror-dspark 2.75 by "
                  "default). The same seed and value give the same target tensors in mirror and mirror-dspark: "
                  "an MTP and a DSpark drafter on one target")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "generator threads (0 = all cores; output is identical)");
  cmd->add_option("--shard-gib", a->shard_gib, "largest shard size in GiB (at least 2 shards are written)")
      ->capture_default_str();
  cmd->add_flag("--quiet", a->quiet, "print nothing on success");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "a tokenizer.json: size the vocabulary from it (BOS/EOS from the tokenizer_config.json beside "
                  "it) and copy both into the checkpoint, so that text prompts work");
  cmd->callback([a, &result] { run(*a, result); });
}

}  // namespace dsv4::cli

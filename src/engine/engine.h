// A checkpoint loaded for generation: the mapped weights, a backend, the target model
// and — when the checkpoint has one and it is wanted — its drafter as draft proposer: the MTP
// module, or DeepSeek-V4-Flash-0731's DSpark stages.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/backends.h"
#include "core/progress.h"
#include "engine/argmax_head_copy.h"
#include "engine/draft_head.h"
#include "model/model_files.h"
#include "model/dspark.h"
#include "model/mtp.h"
#include "model/transformer.h"
#include "speculative/proposer.h"

namespace dsv4 {

// Where the CPU backend reads the weights: in place from the mapped checkpoint, or from a copy in
// its own memory on huge pages (faster steps, a slower start: backend/cpu/cpu_weights.cc). Auto:
// the copy where the checkpoint fits in the memory available, else in place.
enum class WeightPlacement : uint8_t { Auto, Mapped, Memory };
const char* weight_placement_name(WeightPlacement p);
// "auto" | "mapped" | "memory"; throws Error naming the choices otherwise.
WeightPlacement parse_weight_placement(const std::string& name);

struct EngineOptions {
  BackendOptions backend;          // which backend runs the model (and its threads)
  bool load_mtp = true;            // false: no draft proposer even if the checkpoint has one (MTP or DSpark)
  int64_t mtp_vocab = 0;           // draft LM head limited to the first N rows (0 = full)
  int64_t max_rollback = 16;       // longest rollback (>= draft tokens + 1)
  DraftHeadFormat draft_head = DraftHeadFormat::Target;  // the draft head: the target's, or a copy (draft_head.h)
  int64_t draft_rescore = 64;      // with a copy: logits per draft row recomputed exactly (model/head_rescore.h)
  // Greedy rows without mask or logprobs take the bounded head: an 8-bit copy of the head bounds
  // every logit, only the rows that can be the argmax are computed exactly (model/argmax_head.h;
  // the same tokens, about half the head's reads). Made where the head is BF16 or F32.
  bool argmax_head = true;
  bool prefault = true;            // map every page of the weights at open, where they fit in available memory
  WeightPlacement weights = WeightPlacement::Auto;  // where the backend reads the weights from
  // Told how opening goes (bytes of the weights read into memory or copied to the backend's,
  // the head copies made): a real checkpoint takes minutes.
  ProgressFn progress = {};
  // A pipeline stage (model/stage_link.h): this process holds the layers of stage_link->stage()
  // (stage 0 also the embedding, the head and the drafter) and maps, reads and copies only their
  // weights. Null: the whole model in this process.
  StageLink* stage_link = nullptr;
};

struct Engine {
  std::unique_ptr<ModelFiles> files;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> target;
  std::unique_ptr<DraftHead> draft_head;  // the MTP's rounded copy of the head (null: it uses the target's)
  std::unique_ptr<ArgmaxHeadCopy> argmax_head;  // the bounded greedy head's copy (null: the full head only)
  std::unique_ptr<MtpModule> mtp;        // null when absent or not wanted
  std::unique_ptr<DSparkDrafter> dspark; // the same for a DSpark drafter (a checkpoint has one or the other)
  std::unique_ptr<DraftProposer> proposer;
  std::vector<std::string> notes;  // what a user should know about how it opened (the tools print them)

  const ModelConfig& config() const { return files->config; }
  // "MTP", "DSpark", or "" without a drafter.
  const char* drafter_name() const { return mtp ? "MTP" : dspark ? "DSpark" : ""; }
  // The head the MTP drafts with (Auto resolved): the copy's format, else Target.
  DraftHeadFormat draft_head_format() const { return draft_head ? draft_head->format() : DraftHeadFormat::Target; }
  static std::unique_ptr<Engine> open(const std::filesystem::path& dir, const EngineOptions& options = {});
  // Whether a weight (by tensor name) belongs to a stage of `link` (every weight without one).
  static bool stage_holds(const StageLink* link, std::string_view tensor_name);
};

}  // namespace dsv4

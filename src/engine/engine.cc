#include "engine/engine.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "io/mapped_file.h"
#include "speculative/dspark_proposer.h"
#include "speculative/mtp_proposer.h"

namespace dsv4 {

namespace {
std::string gigabytes(int64_t bytes) {
  char s[32];
  if (bytes >= 1000000000) std::snprintf(s, sizeof s, "%.1f GB", double(bytes) / 1e9);
  else std::snprintf(s, sizeof s, "%.1f MB", double(bytes) / 1e6);
  return s;
}
}  // namespace

bool Engine::stage_holds(const StageLink* link, std::string_view name) {
  if (!link || link->stages() <= 1) return true;
  const int s = link->stage();
  if (name.rfind("layers.", 0) != 0) return s == 0;  // the embedding, the head, the drafter: stage 0's
  const size_t dot = name.find('.', 7);
  const int64_t layer = std::stoll(std::string(name.substr(7, dot - 7)));
  return layer >= link->first_layer(s) && layer < link->first_layer(s + 1);
}

namespace {

int64_t view_bytes(const WeightView& v) { return v.present() ? int64_t(v.bytes()) : 0; }

// The pages of a view's codes and scales.
void prefault_view(const TensorStore& store, const WeightView& v) {
  if (!v.present()) return;
  const int64_t codes = weight_code_bytes(v.format, v.rows, v.cols);
  store.prefault(v.data, size_t(codes));
  if (v.scale) store.prefault(v.scale, size_t(int64_t(v.bytes()) - codes));
}

}  // namespace

std::unique_ptr<Engine> Engine::open(const std::filesystem::path& dir, const EngineOptions& options) {
  auto e = std::make_unique<Engine>();
  e->files = ModelFiles::open(dir);

  // A pipeline stage reads the weights of its own layers only (stage 0: also the embedding, the
  // head and the drafter), and makes the head's copies only where the head is.
  const StageLink* link = options.stage_link && options.stage_link->stages() > 1 ? options.stage_link : nullptr;
  const bool has_head = !link || link->stage() == 0;
  std::vector<WeightView*> views;
  for (WeightView* v : weight_views(e->files->weights, e->files->config))
    if (stage_holds(link, v->name())) views.push_back(v);
  int64_t weight_bytes = 0;
  for (const WeightView* v : views) weight_bytes += view_bytes(*v);
  const int64_t total = link ? weight_bytes : int64_t(e->files->store.file_bytes());
  const std::string whose = link ? cat(" (stage ", link->stage(), "'s share)") : std::string();
  // Page faults at load, not in the steps: each 4 KB of weights used for the first time costs a
  // fault, and decoding reaches most experts for the first time over its first hundreds of
  // tokens. A checkpoint larger than the memory available would evict its own pages while they
  // are being mapped: skipped.
  const int64_t available = available_memory_bytes();
  const bool fits = available < 0 || total <= available;
  DSV4_CHECK(fits || options.weights != WeightPlacement::Memory, dir.string(), ": --weights memory needs ",
             gigabytes(total), " for the weights", whose, ", and ", gigabytes(available),
             " are available; --weights mapped (or auto) reads them in place from the page cache instead (slower ",
             "where they do not all stay cached)");
  if (!fits && options.weights == WeightPlacement::Auto)
    e->notes.push_back(cat("the weights (", gigabytes(total), whose, ") do not fit in the ", gigabytes(available),
                           " available: read in place from the page cache (--weights mapped), ",
                           "slower where they do not all stay cached"));
  BackendOptions backend = options.backend;
  backend.weights_in_memory = options.weights == WeightPlacement::Memory || (options.weights == WeightPlacement::Auto && fits);
  // (Weights copied into the backend's memory are read once, in order: no faults to save.)
  const ProgressFn& progress = options.progress;
  if (options.prefault && fits && !backend.weights_in_memory) {
    int64_t read = 0;
    if (progress) progress("reading the weights", 0, total);
    if (link) {
      for (const WeightView* v : views) {
        prefault_view(e->files->store, *v);
        if (progress) progress("reading the weights", read += view_bytes(*v), total);
      }
    } else {
      e->files->store.prefault([&](size_t bytes) {
        if (progress) progress("reading the weights", read += int64_t(bytes), total);
      });
    }
  }
  const bool mtp = options.load_mtp && has_head && e->files->has_mtp();
  e->backend = make_backend(backend);
  // The draft head's copy is read from the mapped head before the backend may move the weights.
  const WeightView& head = e->files->weights.head;
  const DraftHeadFormat head_format =
      resolve_draft_head_format(options.draft_head, head, e->backend->has_kernel_for(int2_copy_geometry(head)));
  if (mtp && head_format != DraftHeadFormat::Target) {
    if (progress) progress("making the draft head's copy", 0, 1);
    e->draft_head = std::make_unique<DraftHead>(head, head_format, options.mtp_vocab, options.backend.threads);
    if (progress) progress("making the draft head's copy", 1, 1);
  }
  if (options.argmax_head && has_head && ArgmaxHeadCopy::possible(head)) {
    if (progress) progress("making the greedy head's copy", 0, 1);
    e->argmax_head = std::make_unique<ArgmaxHeadCopy>(head, options.backend.threads);
    if (progress) progress("making the greedy head's copy", 1, 1);
  }
  if (e->draft_head) views.push_back(&e->draft_head->view());
  if (e->argmax_head) {
    views.push_back(&e->argmax_head->hi());
    views.push_back(&e->argmax_head->lo());
  }
  // (A backend that copies the weights releases the mapping's pages as it goes: one copy at a time.)
  // (Each view's bytes are released as soon as they are copied: the releases count the copy.)
  const TensorStore& store = e->files->store;
  int64_t copied = 0;
  if (progress && backend.weights_in_memory) progress("copying the weights into memory", 0, total);
  e->backend->prepare(views, [&](const void* p, size_t bytes) {
    store.drop_pages(static_cast<const uint8_t*>(p), bytes);
    if (progress) progress("copying the weights into memory", std::min(total, copied += int64_t(bytes)), total);
  });
  if (progress && backend.weights_in_memory) progress("copying the weights into memory", total, total);
  if (e->draft_head) e->draft_head->release_if_moved();
  if (e->argmax_head) e->argmax_head->release_if_moved();
  e->target = std::make_unique<Transformer>(e->files->config, e->files->weights, *e->backend,
                                            TransformerOptions{options.max_rollback});
  if (options.stage_link) e->target->set_stage_link(options.stage_link);
  if (e->argmax_head) e->target->set_argmax_head(e->argmax_head->view());
  if (options.load_mtp && e->files->weights.dspark) {
    // (Every stage knows the taps: the stage that holds a tapped layer computes its mean streams.)
    e->target->set_taps(e->files->config.dspark_target_layer_ids);
    if (has_head) {
      e->dspark = std::make_unique<DSparkDrafter>(*e->target, *e->files->weights.dspark);
      e->proposer = std::make_unique<DSparkProposer>(*e->dspark);
    }
  }
  if (mtp) {
    MtpOptions mo{options.mtp_vocab, options.max_rollback};
    if (e->draft_head) mo.head = &e->draft_head->view();
    mo.rescore = options.draft_rescore;
    e->mtp = std::make_unique<MtpModule>(*e->target, e->files->weights.mtp[0], mo);
    e->proposer = std::make_unique<MtpProposer>(*e->mtp);
  }
  return e;
}

const char* weight_placement_name(WeightPlacement p) {
  switch (p) {
    case WeightPlacement::Auto: return "auto";
    case WeightPlacement::Mapped: return "mapped";
    case WeightPlacement::Memory: return "memory";
  }
  return "?";
}

WeightPlacement parse_weight_placement(const std::string& name) {
  for (WeightPlacement p : {WeightPlacement::Auto, WeightPlacement::Mapped, WeightPlacement::Memory})
    if (name == weight_placement_name(p)) return p;
  throw Error(cat("unknown weight placement '", name, "' (choose auto|mapped|memory)"));
}

}  // namespace dsv4

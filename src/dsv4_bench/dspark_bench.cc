#include "dsv4_bench/dspark_bench.h"

#include <chrono>
#include <random>
#include <set>
#include <string>

#include "dsv4_bench/memory_bandwidth.h"
#include "dsv4_bench/weight_bytes.h"
#include "core/error.h"
#include "speculative/dspark_proposer.h"

namespace dsv4::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Steps timed interleaved: per repetition, each step's untimed preparation, a bandwidth sample,
// then its timed part (a warm-up round first).
struct Interleaved {
  struct Step {
    StepFigures* figures;
    std::function<void(int)> prepare, run;
  };
  std::vector<Step> steps;
  void add(StepFigures& f, std::function<void(int)> run, std::function<void(int)> prepare = {}) {
    steps.push_back({&f, std::move(prepare), std::move(run)});
  }
  void time(int reps, const DSparkBenchOptions& o, std::vector<double>& samples) {
    for (int i = -1; i < reps; ++i)
      for (Step& s : steps) {
        const int rep = i < 0 ? reps : i;  // the warm-up uses tokens of its own
        if (s.prepare) s.prepare(rep);
        if (i >= 0 && o.bandwidth) {
          s.figures->rep_bandwidth_gbs.push_back(o.bandwidth());
          samples.push_back(s.figures->rep_bandwidth_gbs.back());
        }
        const auto t0 = Clock::now();
        s.run(rep);
        if (i >= 0) s.figures->rep_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
    for (Step& s : steps) {
      s.figures->ms = median(s.figures->rep_ms);
      s.figures->bandwidth_gbs = median(s.figures->rep_bandwidth_gbs);
    }
  }
};

}  // namespace

DSparkBenchResult run_dspark_bench(Engine& engine, const DSparkBenchOptions& o) {
  DSV4_CHECK(engine.dspark && engine.proposer, "bench: the checkpoint has no DSpark drafter");
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  Transformer& model = *engine.target;
  DSparkDrafter& drafter = *engine.dspark;
  DraftProposer& proposer = *engine.proposer;
  const ModelConfig& c = model.config();
  const int64_t B = drafter.block_size(), ctx = o.context, reps = o.reps;
  DSV4_CHECK(ctx > c.sliding_window && ctx + B + 2 <= c.max_position_embeddings, "bench: context ", ctx,
             " must exceed the window and fit max_position_embeddings");
  DSV4_CHECK(reps > 0, "bench: at least one repetition");
  std::mt19937_64 rng(o.seed);
  auto random_tokens = [&](int64_t n) {
    std::vector<int32_t> t{};
    t.resize(size_t(n));
    for (auto& x : t) x = int32_t(2 + rng() % uint64_t(c.vocab_size - 2));
    return t;
  };
  const std::vector<int32_t> prompt = random_tokens(ctx);
  std::vector<std::vector<int32_t>> fresh(size_t(reps + 1));  // per repetition (the last: the warm-up's)
  for (auto& f : fresh) f = random_tokens(B + 1);

  DSparkBenchResult res;
  res.context = ctx;
  res.block = B;
  res.stages = drafter.stages();
  // ---- the prompt, as the decoder runs it: target chunks with taps, then the proposer's rings
  auto seq = model.new_sequence();
  std::unique_ptr<ProposerState> state = proposer.new_state();
  Transformer::Output out;
  const auto t0 = Clock::now();
  for (int64_t at = 0; at < ctx; at += o.prefill_chunk) {
    const int64_t n = std::min(o.prefill_chunk, ctx - at);
    Transformer::Request r{seq.get(), std::span(prompt).subspan(size_t(at), size_t(n)), false, at + n < ctx, true, true};
    model.forward(std::span(&r, 1), out);
    const PrefillChunk chunk{state.get(), prompt, at, n, 0, at};
    proposer.prefill(std::span(&chunk, 1), out.taps);
    say("prefill " + std::to_string(at + n) + " / " + std::to_string(ctx));
  }
  res.prefill_seconds = std::chrono::duration<double>(Clock::now() - t0).count();

  // ---- bytes of a draft step: the stages' weights and the experts a block's rows select (from a
  // traced draft on the same rings: drafts leave them unchanged), the LM head for K rows, a Markov
  // row per draft, the confidence head; the ring rows read.
  const DSparkWeights& w = *engine.files->weights.dspark;
  SequenceCache& state_rings = DSparkProposer::rings(*state);
  for (int i = 0; i < reps; ++i) {
    Tracer tracer;
    DSparkDrafter::Output traced;
    const DSparkDrafter::BlockRequest block{&state_rings, fresh[size_t(i)][0], 1};
    drafter.draft(std::span(&block, 1), traced, &tracer);
    for (size_t s = 0; s < w.stages.size(); ++s) {
      const Tracer::Entry* e = tracer.find("dspark" + std::to_string(s) + ".decode.gate.indices");
      DSV4_CHECK(e, "bench: the traced draft lacks stage ", s, "'s expert choice");
      const std::set<int64_t> chosen(e->i64.begin(), e->i64.end());
      res.stage_experts += int64_t(chosen.size());
      res.stage_expert_bytes += experts_bytes(w.stages[s].ffn, chosen);
    }
  }
  res.stage_experts /= reps;
  res.stage_expert_bytes /= reps;
  for (const BlockWeights& b : w.stages) res.stage_dense_bytes += block_dense_bytes(b);
  res.head_bytes = view_bytes(model.weights().head) + view_bytes(w.norm) + view_bytes(w.hc_head.fn);
  res.markov_row_bytes = view_bytes(w.markov_w2) + c.dspark_markov_rank * 2;
  res.confidence_bytes = view_bytes(w.confidence);
  res.main_proj_bytes = view_bytes(w.main_proj) + view_bytes(w.main_norm);
  for (const BlockWeights& b : w.stages) res.main_proj_bytes += view_bytes(b.attn.wkv) + view_bytes(b.attn.kv_norm);
  const int64_t ring_bytes = res.stages * c.sliding_window * c.head_dim * 2;

  // ---- the steps
  Interleaved steps;
  std::vector<std::vector<int32_t>> contexts(size_t(reps + 1), prompt);  // the prompt and each repetition's anchor
  for (int i = 0; i <= reps; ++i) contexts[size_t(i)].push_back(fresh[size_t(i)][0]);
  std::vector<Draft> drafts;
  for (int64_t k = 1; k <= B; ++k)
    steps.add(res.draft[k], [&, k](int i) {
      const DraftRequest r{state.get(), ctx - 1, int(k), contexts[size_t(i)], nullptr, nullptr, 0, nullptr, false};
      proposer.propose(std::span(&r, 1), drafts);
    });
  std::vector<std::unique_ptr<SequenceCache>> rings(size_t(reps + 1));
  for (int64_t n = 1; n <= B + 1; ++n) {
    steps.add(res.verify[n], [&, n](int i) {
      Transformer::Request r{seq.get(), std::span(fresh[size_t(i)]).first(size_t(n)), true, false, false, true};
      model.forward(std::span(&r, 1), out);
      seq->truncate(ctx);
    });
    // The rings' rows of n verified positions (fresh rings at the context: the cost does not depend on them).
    steps.add(
        res.ring_writes[n],
        [&, n](int i) {
          const DSparkDrafter::Context ctx_rows{rings[size_t(i)].get(), 0, n, n};
          drafter.extend_context(std::span(&ctx_rows, 1), out.taps);
        },
        [&, n](int i) {
          Transformer::Request r{seq.get(), std::span(fresh[size_t(i)]).first(size_t(n)), true, false, false, true};
          model.forward(std::span(&r, 1), out);
          seq->truncate(ctx);
          rings[size_t(i)] = drafter.new_sequence();
          rings[size_t(i)]->skip_to(ctx);
        });
  }
  // The head alone on n rows (the streams of the last verification pass's rows).
  Workspace ws(model.backend());
  std::vector<float> streams;
  for (int64_t n = 1; n <= B + 1; ++n)
    steps.add(
        res.head[n],
        [&, n](int) {
          ws.reset();
          Pass p(model.backend(), ws);
          const int64_t hc = c.hc_mult, D = c.hidden_size;
          Tensor x = p.alloc({n, hc, D}), logits = p.alloc({n, c.vocab_size});
          model.backend().from_host(x, streams.data());
          model.head(p, x, model.weights().hc_head, model.weights().norm, model.weights().head, logits, "head");
        },
        [&, n](int i) {
          Transformer::Request r{seq.get(), std::span(fresh[size_t(i)]).first(size_t(n)), true, false, false, true};
          model.forward(std::span(&r, 1), out);
          seq->truncate(ctx);
          streams = out.hidden_host();
        });
  say("timing draft steps, verification passes, ring writes and the head");
  steps.time(int(reps), o, res.bandwidth_samples);

  for (auto& [k, f] : res.draft) {
    f.weight_bytes = res.stage_dense_bytes + res.stage_expert_bytes + res.head_bytes + k * res.markov_row_bytes +
                     res.confidence_bytes + B * c.hidden_size * 2;
    f.cache_bytes = ring_bytes;
  }
  for (auto& [n, f] : res.ring_writes) f.weight_bytes = res.main_proj_bytes;
  for (auto& [n, f] : res.head) f.weight_bytes = view_bytes(model.weights().head);
  return res;
}

}  // namespace dsv4::bench

#include "dsv4_bench/model_bench.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <set>

#include "dsv4_bench/memory_bandwidth.h"
#include "dsv4_bench/weight_bytes.h"
#include "core/error.h"
#include "model/pass.h"
#include "speculative/speculative_decoder.h"

namespace dsv4::bench {

double time_ms(const std::function<void()>& fn, int reps, int warmup) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(ms);
}

double StepFigures::fraction_of_bandwidth() const {
  std::vector<double> f;
  for (size_t i = 0; i < rep_ms.size() && i < rep_bandwidth_gbs.size(); ++i)
    if (rep_ms[i] > 0 && rep_bandwidth_gbs[i] > 0)
      f.push_back(double(bytes()) / (rep_ms[i] * 1e-3) / 1e9 / rep_bandwidth_gbs[i]);
  return median(f);
}

double StepFigures::time_ratio(const StepFigures& base) const {
  std::vector<double> r;
  for (size_t i = 0; i < rep_ms.size() && i < base.rep_ms.size(); ++i)
    if (base.rep_ms[i] > 0) r.push_back(rep_ms[i] / base.rep_ms[i]);
  return r.empty() ? (base.ms > 0 ? ms / base.ms : 0.0) : median(r);
}

namespace {

std::set<int64_t> traced_experts(const Tracer& t, const std::string& name) {
  const Tracer::Entry* e = t.find(name);
  DSV4_CHECK(e, "bench: the trace lacks ", name);
  return std::set<int64_t>(e->i64.begin(), e->i64.end());
}

std::vector<float> traced_f32(const Tracer& t, const std::string& name) {
  const Tracer::Entry* e = t.find(name);
  DSV4_CHECK(e, "bench: the trace lacks ", name);
  return e->f32;
}

// A traced forward of `tokens` appended to `seq`, undone afterwards: each block's input and
// selected experts, and the final streams.
struct Capture {
  std::vector<std::vector<float>> block_in;
  std::vector<std::set<int64_t>> experts;
  std::vector<float> hidden;
};

Capture capture_target(Transformer& model, SequenceCache& seq, std::span<const int32_t> tokens) {
  const int64_t length = seq.length();
  Tracer tracer;
  Transformer::Request r{&seq, tokens, false};
  Transformer::Output out;
  model.forward(std::span(&r, 1), out, &tracer);
  seq.truncate(length);
  Capture c;
  for (const Block& b : model.blocks()) {
    c.block_in.push_back(traced_f32(tracer, b.scope() + ".decode.in"));
    c.experts.push_back(traced_experts(tracer, b.scope() + ".decode.gate.indices"));
  }
  c.hidden = out.hidden_host();
  return c;
}

Capture capture_mtp(MtpModule& mtp, SequenceCache& seq, const float* streams, std::span<const int32_t> tokens) {
  const int64_t length = seq.length();
  Tracer tracer;
  MtpModule::Request r{&seq, streams, tokens, false};
  MtpModule::Output out;
  mtp.forward(std::span(&r, 1), out, &tracer);
  seq.truncate(length);
  Capture c;
  c.block_in.push_back(traced_f32(tracer, "mtp.decode.in"));
  c.experts.push_back(traced_experts(tracer, "mtp.decode.gate.indices"));
  c.hidden = out.streams_host();
  return c;
}

}  // namespace

std::vector<std::vector<float>> capture_block_inputs(Transformer& model, SequenceCache& seq,
                                                     std::span<const int32_t> tokens) {
  return capture_target(model, seq, tokens).block_in;
}

std::vector<float> repeat_rows(const std::vector<float>& row, int64_t n) {
  std::vector<float> out;
  out.reserve(row.size() * size_t(n));
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), row.begin(), row.end());
  return out;
}

void run_block(const Block& block, Backend& be, Workspace& ws, SequenceCache& seq, std::span<const int32_t> tokens,
               int64_t pos0, const std::vector<float>& x, int64_t hc, int64_t D) {
  ws.reset();
  Pass p(be, ws);
  p.phase = "decode";
  p.sequences.push_back(&seq);
  for (size_t i = 0; i < tokens.size(); ++i) {
    p.tokens.push_back(tokens[i]);
    p.positions.push_back(pos0 + int64_t(i));
    p.sequence_of_row.push_back(0);
  }
  Tensor in = p.alloc({int64_t(tokens.size()), hc, D});
  be.from_host(in, x.data());
  block.forward(p, in);
}

namespace {

// Fills a window-only MTP layer's cache with the rows of positions [end − rows, end): all that
// such a layer reads at position `end` (older rows fall out of the window and are released).
void fill_mtp(MtpModule& mtp, SequenceCache& seq, int64_t end, const std::vector<float>& streams,
              std::span<const int32_t> next_tokens) {
  const int64_t rows = int64_t(next_tokens.size());
  seq.set_length(end - rows);
  MtpModule::Request r{&seq, streams.data(), next_tokens, false};
  MtpModule::Output out;
  mtp.forward(std::span(&r, 1), out);
}

int64_t mtp_fixed_bytes(const MtpModule& mtp) {
  const MtpWeights& w = mtp.weights();
  return view_bytes(w.e_proj) + view_bytes(w.h_proj) + view_bytes(w.enorm) + view_bytes(w.hnorm) +
         view_bytes(w.norm) + view_bytes(w.hc_head.fn) + view_bytes(w.hc_head.base) + view_bytes(w.hc_head.scale);
}

const char* kind_name(int64_t ratio) { return ratio == 0 ? "window" : ratio == 4 ? "csa" : "hca"; }

}  // namespace

ModelBenchResult run_model_bench(Engine& engine, const ModelBenchOptions& o) {
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  Transformer& model = *engine.target;
  DSV4_CHECK(engine.mtp, "bench: the checkpoint has no MTP module");
  MtpModule& mtp = *engine.mtp;
  const ModelConfig& c = model.config();
  Backend& be = model.backend();
  const int64_t hc = c.hc_mult, D = c.hidden_size, width = hc * D, ctx = o.context;
  const int64_t max_rows = *std::max_element(o.extend_rows.begin(), o.extend_rows.end());
  DSV4_CHECK(ctx > c.sliding_window && ctx + max_rows + 1 <= c.max_position_embeddings, "bench: context ", ctx,
             " must exceed the window and fit max_position_embeddings");
  DSV4_CHECK(o.reps > 0, "bench: at least one repetition");
  std::mt19937_64 rng(o.seed);
  auto random_tokens = [&](int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = int32_t(2 + rng() % uint64_t(c.vocab_size - 2));
    return t;
  };
  const std::vector<int32_t> tokens = random_tokens(ctx);
  const std::span<const int32_t> all(tokens);
  // The tokens each repetition decodes (the last set: the warm-up's): a new token set every
  // repetition routes to new experts and touches their pages afresh, as generation does.
  const int reps = o.reps, warm = o.reps;
  std::vector<std::vector<int32_t>> fresh(size_t(reps + 1));
  for (auto& f : fresh) f = random_tokens(max_rows);
  auto fresh_tokens = [&](int rep, int64_t n) { return std::span<const int32_t>(fresh[size_t(rep)]).first(size_t(n)); };

  ModelBenchResult res;
  res.context = ctx;
  // Times several steps interleaved (so that a drift of the machine touches all alike): a warm-up
  // run of each, then per repetition, for each step, a bandwidth sample and the timed run.
  using Timed = std::pair<StepFigures*, std::function<void(int rep)>>;
  auto time_steps = [&](const std::vector<Timed>& steps) {
    for (auto& [f, fn] : steps) fn(warm);
    for (int i = 0; i < reps; ++i)
      for (auto& [f, fn] : steps) {
        if (o.bandwidth) {
          f->rep_bandwidth_gbs.push_back(o.bandwidth());
          res.bandwidth_samples.push_back(f->rep_bandwidth_gbs.back());
        }
        const auto t0 = std::chrono::steady_clock::now();
        fn(i);
        f->rep_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    for (auto& [f, fn] : steps) {
      f->ms = median(f->rep_ms);
      f->bandwidth_gbs = median(f->rep_bandwidth_gbs);
    }
  };
  auto time_step = [&](StepFigures& f, const std::function<void(int)>& fn) { time_steps({{&f, fn}}); };

  // ---- prefill the context; keep the last window's streams for the MTP caches
  auto seq = model.new_sequence();
  const int64_t W = std::min<int64_t>(c.sliding_window, ctx - 1);
  std::vector<float> tail(size_t((W + 1) * width));  // streams of positions ctx-1-W .. ctx-1
  const auto t0 = std::chrono::steady_clock::now();
  Transformer::Output out;
  for (int64_t at = 0; at < ctx; at += o.prefill_chunk) {
    const int64_t n = std::min(o.prefill_chunk, ctx - at);
    Transformer::Request r{seq.get(), all.subspan(size_t(at), size_t(n)), false, false, /*prompt=*/true};
    model.forward(std::span(&r, 1), out);
    const std::vector<float> hidden = at + n > ctx - 1 - W ? out.hidden_host() : std::vector<float>();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = at + i, j = pos - (ctx - 1 - W);
      if (j >= 0) std::copy_n(hidden.data() + i * width, width, tail.data() + j * width);
    }
    say("prefill " + std::to_string(at + n) + " / " + std::to_string(ctx));
  }
  res.prefill_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t l = 0; l < seq->num_layers(); ++l) {
    const CacheFootprint f = layer_cache_footprint(model.cache_geometry()[l], seq->retain());
    res.cache_bytes.push_back(seq->layer(l).bytes_held());
    res.cache_bound.push_back(f.at(ctx));
    res.cache_bytes_per_token.push_back(f.bytes_per_token);
  }
  const std::vector<float> last_stream(tail.end() - width, tail.end());  // X_{ctx-1}

  Workspace ws(be);
  // A step's bytes: the mean over the timed repetitions (the distinct experts of n rows vary).
  auto mean_bytes = [&](const std::function<int64_t(int)>& bytes_of) {
    int64_t total = 0;
    for (int i = 0; i < reps; ++i) total += bytes_of(i);
    return total / reps;
  };
  // LayerKind::extend_same: `same_rows` copies of each repetition's decode row through `block`.
  struct SameRows {
    std::vector<std::vector<float>> in;
    std::vector<int32_t> tokens;
  };
  auto add_same_rows = [&](LayerKind& k, const Block& block, SequenceCache& s, int64_t pos0,
                           const std::function<const std::vector<float>&(int)>& decode_in, int64_t cache_per_row,
                           SameRows& keep, std::vector<Timed>& steps) {
    if (o.same_rows < 2) return;
    keep.in.resize(size_t(reps + 1));
    for (int i = 0; i <= reps; ++i) keep.in[size_t(i)] = repeat_rows(decode_in(i), o.same_rows);
    k.same_rows = o.same_rows;
    k.extend_same.weight_bytes = k.decode.weight_bytes;
    k.extend_same.cache_bytes = o.same_rows * cache_per_row;
    steps.push_back({&k.extend_same, [&, pos0](int i) {
                       keep.tokens.assign(size_t(o.same_rows), fresh[size_t(i)][0]);
                       run_block(block, be, ws, s, keep.tokens, pos0, keep.in[size_t(i)], hc, D);
                     }});
  };
  // ---- target layers: one kind at a time (the first layer of each kind)
  std::map<int64_t, std::vector<Capture>> captures;  // rows → per repetition, a traced forward of its tokens
  std::vector<int64_t> row_counts = {1};
  row_counts.insert(row_counts.end(), o.extend_rows.begin(), o.extend_rows.end());
  for (int64_t n : row_counts)
    for (int i = 0; i <= reps; ++i) captures[n].push_back(capture_target(model, *seq, fresh_tokens(i, n)));
  std::set<int64_t> seen;
  const auto& blocks = model.blocks();
  for (size_t l = 0; l < blocks.size(); ++l) {
    const int64_t ratio = blocks[l].weights().compress_ratio;
    if (!seen.insert(ratio).second) continue;
    LayerKind k;
    k.name = kind_name(ratio);
    k.ratio = ratio;
    k.layer = int64_t(l);
    const int64_t dense = block_dense_bytes(blocks[l].weights());
    const int64_t cache = cache_read_bytes(model.cache_geometry()[l], ctx, c.index_topk);
    const MoeWeights& ffn = blocks[l].weights().ffn;
    std::vector<Timed> steps;
    for (auto& [n, caps] : captures) {
      StepFigures& f = n == 1 ? k.decode : k.extend[n];
      f.weight_bytes = dense + mean_bytes([&, &caps = caps](int i) { return experts_bytes(ffn, caps[size_t(i)].experts[l]); });
      f.cache_bytes = n * cache;
      k.experts[n] = mean_bytes([&, &caps = caps](int i) { return int64_t(caps[size_t(i)].experts[l].size()); });
      steps.push_back({&f, [&, n = n, &caps = caps](int i) {
                         run_block(blocks[l], be, ws, *seq, fresh_tokens(i, n), ctx, caps[size_t(i)].block_in[l], hc, D);
                       }});
    }
    k.decode.format_bytes = block_dense_format_bytes(blocks[l].weights());
    k.decode.format_bytes += experts_format_bytes(ffn, captures[1][0].experts[l]);  // any 6 experts: equal bytes
    // The decode row of the warm-up again and again: the same experts, their pages warm.
    k.decode_repeated.weight_bytes = k.decode.weight_bytes;
    k.decode_repeated.format_bytes = k.decode.format_bytes;
    k.decode_repeated.cache_bytes = k.decode.cache_bytes;
    steps.push_back({&k.decode_repeated, [&](int) {
                       run_block(blocks[l], be, ws, *seq, fresh_tokens(warm, 1), ctx, captures[1][size_t(warm)].block_in[l],
                                 hc, D);
                     }});
    SameRows same;
    add_same_rows(k, blocks[l], *seq, ctx, [&](int i) -> const std::vector<float>& { return captures[1][size_t(i)].block_in[l]; },
                  cache, same, steps);
    time_steps(steps);
    say(std::string("layer ") + std::to_string(l) + " (" + k.name + "): " + std::to_string(k.decode.ms) + " ms");
    res.kinds.push_back(std::move(k));
  }

  // ---- the head (hc_head + norm + LM head) for 1.. rows, and the whole decode step
  const std::vector<float>& streams8 = captures.rbegin()->second[0].hidden;
  const int64_t head_fixed = view_bytes(model.weights().hc_head.fn) + view_bytes(model.weights().hc_head.base) +
                             view_bytes(model.weights().hc_head.scale) + view_bytes(model.weights().norm);
  {
    std::vector<Timed> steps;
    for (auto& [n, caps] : captures) {
      StepFigures& f = res.head[n];
      f.weight_bytes = head_fixed + view_bytes(model.weights().head);
      for (const WeightView* w : {&model.weights().hc_head.fn, &model.weights().hc_head.base,
                                  &model.weights().hc_head.scale, &model.weights().norm, &model.weights().head})
        f.format_bytes[w->format] += view_bytes(*w);
      steps.push_back({&f, [&, n = n](int) {
                         ws.reset();
                         Pass p(be, ws);
                         Tensor s = p.alloc({n, hc, D}), logits = p.alloc({n, c.vocab_size});
                         be.from_host(s, streams8.data());
                         model.head(p, s, model.weights().hc_head, model.weights().norm, model.weights().head, logits,
                                    "head");
                       }});
    }
    time_steps(steps);
  }
  res.embed.weight_bytes = D * 2;
  time_step(res.decode_step, [&](int i) {
    Transformer::Request r{seq.get(), fresh_tokens(i, 1), false};
    model.forward(std::span(&r, 1), out);
    seq->truncate(ctx);
  });
  res.decode_step.weight_bytes = res.embed.weight_bytes + res.head[1].weight_bytes;
  res.decode_step.format_bytes = res.head[1].format_bytes;
  res.decode_step.format_bytes[model.weights().embed.format] += res.embed.weight_bytes;
  for (size_t l = 0; l < blocks.size(); ++l) {
    res.decode_step.format_bytes += block_dense_format_bytes(blocks[l].weights());
    res.decode_step.format_bytes += experts_format_bytes(blocks[l].weights().ffn, captures[1][0].experts[l]);
    res.decode_step.weight_bytes +=
        block_dense_bytes(blocks[l].weights()) +
        mean_bytes([&](int i) { return experts_bytes(blocks[l].weights().ffn, captures[1][size_t(i)].experts[l]); });
    res.decode_step.cache_bytes += cache_read_bytes(model.cache_geometry()[l], ctx, c.index_topk);
  }
  say("decode step: " + std::to_string(res.decode_step.ms) + " ms");

  // ---- MTP: the draft step (full head and a limited vocabulary) and its block alone
  std::vector<int32_t> mtp_fill_tokens(all.begin() + (ctx - W), all.begin() + ctx);  // tokens after each stream
  const std::vector<float> fill_streams(tail.begin(), tail.end() - width);
  auto mtp_seq = mtp.new_sequence();
  fill_mtp(mtp, *mtp_seq, ctx - 1, fill_streams, mtp_fill_tokens);
  const int64_t mtp_cache = cache_read_bytes(cache_geometry_for(c, 0), ctx - 1, c.index_topk);
  const int64_t mtp_dense = mtp_fixed_bytes(mtp) + block_dense_bytes(mtp.weights().block) + D * 2;
  auto draft_step = [&](MtpModule& m, SequenceCache& s) {
    StepFigures f;
    MtpModule::Output mo;
    time_step(f, [&](int i) {
      MtpModule::Request r{&s, last_stream.data(), fresh_tokens(i, 1), false};
      m.forward(std::span(&r, 1), mo);
      s.truncate(ctx - 1);
    });
    f.weight_bytes = mtp_dense + int64_t(m.head().bytes()) + mean_bytes([&](int i) {
                       const Capture cap = capture_mtp(m, s, last_stream.data(), fresh_tokens(i, 1));
                       return experts_bytes(m.weights().block.ffn, cap.experts[0]);
                     });
    f.cache_bytes = mtp_cache;
    const MtpWeights& mw = m.weights();
    f.format_bytes = block_dense_format_bytes(mw.block);
    f.format_bytes += experts_format_bytes(mw.block.ffn, captures[1][0].experts.back());  // 6 experts' bytes
    for (const WeightView* w : {&mw.e_proj, &mw.h_proj, &mw.enorm, &mw.hnorm, &mw.norm, &mw.hc_head.fn})
      f.format_bytes[w->format] += view_bytes(*w);
    f.format_bytes[m.head().format] += int64_t(m.head().bytes());  // the draft head's rows
    f.format_bytes[WeightFormat::BF16] += D * 2;                      // the embedding row
    return f;
  };
  res.draft = draft_step(mtp, *mtp_seq);
  say("draft step: " + std::to_string(res.draft.ms) + " ms");
  if (o.mtp_vocab > 0 && o.mtp_vocab < c.vocab_size) {
    MtpModule limited(model, engine.files->weights.mtp[0], MtpOptions{o.mtp_vocab, 16});
    auto lim_seq = limited.new_sequence();
    fill_mtp(limited, *lim_seq, ctx - 1, fill_streams, mtp_fill_tokens);
    res.draft_vocab = draft_step(limited, *lim_seq);
    res.mtp_vocab = o.mtp_vocab;
    say("draft step (" + std::to_string(o.mtp_vocab) + " rows): " + std::to_string(res.draft_vocab.ms) + " ms");
  }
  // The same step with rounded copies of the head (engine/draft_head.h).
  for (DraftHeadFormat format : {DraftHeadFormat::Fp8, DraftHeadFormat::Int4}) {
    if (engine.files->weights.head.format != WeightFormat::BF16 && engine.files->weights.head.format != WeightFormat::F32)
      break;
    DraftHead copy(engine.files->weights.head, format);
    MtpOptions mo{0, 16};
    mo.head = &copy.view();
    MtpModule rounded(model, engine.files->weights.mtp[0], mo);
    auto seq = rounded.new_sequence();
    fill_mtp(rounded, *seq, ctx - 1, fill_streams, mtp_fill_tokens);
    StepFigures& f = format == DraftHeadFormat::Fp8 ? res.draft_fp8 : res.draft_int4;
    f = draft_step(rounded, *seq);
    say(std::string("draft step (") + draft_head_format_name(format) + " head): " + std::to_string(f.ms) + " ms");
  }
  LayerKind mk;
  mk.name = "mtp_block";
  mk.ratio = 0;
  std::vector<Timed> mtp_steps;
  // Rows per repetition: (X_{ctx-1}, x_ctx), then the target's extend streams paired with the next tokens.
  std::map<int64_t, std::vector<Capture>> mtp_captures;
  for (auto& [n, caps] : captures)
    for (int i = 0; i <= reps; ++i) {
      std::vector<float> streams(last_stream);
      streams.insert(streams.end(), caps[size_t(i)].hidden.begin(), caps[size_t(i)].hidden.begin() + (n - 1) * width);
      mtp_captures[n].push_back(capture_mtp(mtp, *mtp_seq, streams.data(), fresh_tokens(i, n)));
    }
  const MoeWeights& mtp_ffn = mtp.weights().block.ffn;
  for (auto& [n, caps] : mtp_captures) {
    StepFigures& f = n == 1 ? mk.decode : mk.extend[n];
    f.weight_bytes = block_dense_bytes(mtp.weights().block) +
                     mean_bytes([&, &caps = caps](int i) { return experts_bytes(mtp_ffn, caps[size_t(i)].experts[0]); });
    f.cache_bytes = n * mtp_cache;
    mk.experts[n] = mean_bytes([&, &caps = caps](int i) { return int64_t(caps[size_t(i)].experts[0].size()); });
    mtp_steps.push_back({&f, [&, n = n, &caps = caps](int i) {
                           run_block(mtp.block(), be, ws, *mtp_seq, fresh_tokens(i, n), ctx - 1, caps[size_t(i)].block_in[0],
                                     hc, D);
                         }});
  }
  SameRows mtp_same;
  add_same_rows(mk, mtp.block(), *mtp_seq, ctx - 1,
                [&](int i) -> const std::vector<float>& { return mtp_captures[1][size_t(i)].block_in[0]; }, mtp_cache,
                mtp_same, mtp_steps);
  time_steps(mtp_steps);
  res.kinds.push_back(std::move(mk));
  return res;
}

std::vector<EndToEnd> run_end_to_end(Engine& engine, const std::vector<DraftLength>& lengths, int64_t prompt_tokens,
                                     int64_t new_tokens, uint64_t seed, int rounds) {
  const ModelConfig& c = engine.config();
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> prompts(1);
  for (int64_t i = 0; i < prompt_tokens; ++i) prompts[0].push_back(int32_t(2 + rng() % uint64_t(c.vocab_size - 2)));
  std::vector<DraftLength> resolved;
  for (const DraftLength& d : lengths) {
    DSV4_CHECK((!d.automatic && d.tokens == 0) || engine.proposer, "bench: end-to-end draft ", draft_length_name(d),
               " needs a drafter");
    resolved.push_back(resolve_draft_length(d, engine.proposer.get()));
  }
  EndToEnd learned;  // the auto run's scheduler, as it ended
  auto run = [&](const DraftLength& d, int64_t n) {
    SpeculativeDecoder decoder(*engine.target, d.tokens > 0 ? engine.proposer.get() : nullptr);
    GenerateOptions o;
    o.max_new_tokens = n;
    apply_draft_length(d, o);
    decoder.generate(prompts, o);
    if (const VerifyScheduler* s = decoder.scheduler(); s && d.automatic) {
      learned.pass_ms_by_rows.clear();
      learned.draft_ms.clear();
      for (auto [rows, t] : s->pass_cost().points()) learned.pass_ms_by_rows.push_back({rows, t * 1e3});
      for (auto [n2, t] : s->draft_cost().points()) learned.draft_ms.push_back({n2, t * 1e3});
      learned.expected_gain = s->expectation().gain();
    }
    return decoder.metrics();
  };
  DraftLength longest;
  for (const DraftLength& d : resolved)
    if (d.tokens > longest.tokens) longest = {d.tokens, false};
  run(longest, 4);  // warm-up: touches the drafter's and the target's weights once
  std::vector<EndToEnd> rows(resolved.size());
  for (int round = 0; round < std::max(rounds, 1); ++round)
    for (size_t i = 0; i < resolved.size(); ++i) {  // interleaved: the machine's drift hits every k alike
      const DecodeMetrics m = run(resolved[i], new_tokens);
      EndToEnd& e = rows[i];
      e.k = resolved[i].tokens;
      e.automatic = resolved[i].automatic;
      e.round_tokens_per_s.push_back(m.decode_tokens_per_s());
      e.acceptance = m.acceptance_rate();
      e.acceptance_by_position = m.acceptance_by_position();
      e.mean_accepted_length = m.mean_accepted_length();
      e.partial_share = m.partial_share();
      e.verified_per_step = m.sequence_steps ? double(m.drafted) / double(m.sequence_steps) : 0.0;
      if (e.automatic) {
        e.verified_steps = m.verified_steps;
        e.pass_ms_by_rows = learned.pass_ms_by_rows;
        e.draft_ms = learned.draft_ms;
        e.expected_gain = learned.expected_gain;
      }
    }
  for (EndToEnd& e : rows) e.tokens_per_s = median(e.round_tokens_per_s);
  return rows;
}

}  // namespace dsv4::bench

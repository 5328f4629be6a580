#include "engine/dspark_trace.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace dsv4 {

namespace {

void append(std::vector<float>& to, const std::vector<float>& from) { to.insert(to.end(), from.begin(), from.end()); }

float margin(const float* row, int64_t n) {  // top-1 minus top-2
  float a = -INFINITY, b = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    if (row[i] > a) {
      b = a;
      a = row[i];
    } else if (row[i] > b) {
      b = row[i];
    }
  }
  return a - b;
}

int32_t argmax(const float* row, int64_t n) { return int32_t(std::max_element(row, row + n) - row); }

}  // namespace

DSparkTrace dspark_teacher_forced(Engine& engine, std::span<const int32_t> tokens, int64_t P, bool trace_stages,
                                  std::span<const int64_t> stage_out_steps) {
  DSV4_CHECK(engine.dspark, engine.files->dir.string(), ": no DSpark drafter loaded (a checkpoint with dspark_* "
             "config keys and its mtp.N stages)");
  const int64_t T = int64_t(tokens.size());
  DSV4_CHECK(P >= 1 && P < T, "dspark trace: prompt length ", P, " must be in [1, ", T, ") (a draft needs an anchor)");
  Transformer& target = *engine.target;
  DSparkDrafter& drafter = *engine.dspark;
  const ModelConfig& c = engine.config();
  DSparkTrace t;
  t.tokens = T;
  t.prompt = P;
  t.steps = T - P;
  t.block = drafter.block_size();
  t.vocab = c.vocab_size;
  t.hidden = c.hidden_size;
  t.taps_width = drafter.taps_width();
  t.stages = drafter.stages();
  t.window = drafter.window();
  t.head_dim = c.head_dim;
  t.top_k = c.num_experts_per_tok;
  const int64_t B = t.block, V = t.vocab, D = t.hidden, S = t.stages;

  auto seq = target.new_sequence();
  auto rings = drafter.new_sequence();
  Transformer::Output out;
  std::vector<float> main_x;
  // The target over tokens [first, first + n), then the rings take those positions from its taps.
  auto target_call = [&](int64_t first, int64_t n, bool last) {
    Transformer::Request r{seq.get(), tokens.subspan(size_t(first), size_t(n)), false, false, first == 0, true};
    target.forward(std::span(&r, 1), out);
    t.target_logits.insert(t.target_logits.end(), out.logits.end() - V, out.logits.end());
    append(t.main_hidden, out.taps_host());
    if (last) return;  // (the last token's context row is never used by a draft)
    const DSparkDrafter::Context ctx{rings.get(), 0, n, n};
    drafter.extend_context(std::span(&ctx, 1), out.taps, &main_x);
    append(t.main_x, main_x);
  };
  target_call(0, P, false);
  for (int64_t s = 0; s < S; ++s) {  // each stage's ring after the prompt, slot p % W
    std::vector<int64_t> positions;
    for (int64_t p = std::max<int64_t>(0, P - t.window); p < P; ++p) positions.push_back(p);
    const std::vector<float> rows = drafter.ring_rows(*rings, size_t(s), positions);
    std::vector<float> ring(size_t(t.window * t.head_dim), 0.0f);
    for (size_t i = 0; i < positions.size(); ++i)
      std::copy_n(rows.begin() + long(i) * t.head_dim, t.head_dim, ring.begin() + (positions[i] % t.window) * t.head_dim);
    append(t.ring_after_prefill, ring);
  }

  DSparkDrafter::Output draft;
  Tracer tracer;
  std::vector<float> bias, confidence;
  for (int64_t j = 0; j < t.steps; ++j) {
    const int64_t s = P - 1 + j;
    if (j > 0) target_call(s, 1, false);
    t.step_pos.push_back(s);
    const DSparkDrafter::BlockRequest block{rings.get(), tokens[size_t(s + 1)], B};
    tracer.clear();
    drafter.draft(std::span(&block, 1), draft, trace_stages ? &tracer : nullptr);
    // Row by row: the Markov bias of row k is that of its input, the anchor or draft k.
    std::vector<int32_t> ids{tokens[size_t(s + 1)]};
    std::vector<int64_t> rows;
    for (int64_t k = 0; k < B; ++k) {
      drafter.markov_bias(std::span(&ids.back(), 1), bias);
      const float* base = draft.base_row(0, k);
      t.base_logits.insert(t.base_logits.end(), base, base + V);
      std::vector<float> row(base, base + V);
      for (int64_t v = 0; v < V; ++v) row[size_t(v)] += bias[size_t(v)];
      t.margins.push_back(margin(row.data(), V));
      ids.push_back(argmax(row.data(), V));
      append(t.logits, row);
      rows.push_back(k);
    }
    drafter.confidence(draft, rows, std::span(ids).first(size_t(B)), confidence);
    append(t.confidence, confidence);
    t.draft_ids.insert(t.draft_ids.end(), ids.begin(), ids.end());
    std::vector<float> hidden(size_t(B * D));
    drafter.backend().to_host(draft.head_hidden, hidden.data());
    append(t.head_hidden, hidden);
    if (!trace_stages) continue;
    const bool keep_out = std::find(stage_out_steps.begin(), stage_out_steps.end(), j) != stage_out_steps.end();
    for (int64_t st = 0; st < S; ++st) {
      const std::string scope = "dspark" + std::to_string(st) + ".decode.";
      const Tracer::Entry* gate = tracer.find(scope + "gate.indices");
      DSV4_CHECK(gate, "dspark trace: no ", scope, "gate.indices recorded");
      t.gate_indices.insert(t.gate_indices.end(), gate->i64.begin(), gate->i64.end());
      if (!keep_out) continue;
      const Tracer::Entry* o = tracer.find(scope + "out");
      DSV4_CHECK(o, "dspark trace: no ", scope, "out recorded");
      t.stage_out.insert(t.stage_out.end(), o->f32.begin(), o->f32.end());
    }
  }
  target_call(T - 1, 1, true);
  return t;
}

}  // namespace dsv4

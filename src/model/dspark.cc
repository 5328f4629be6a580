#include "model/dspark.h"

#include <limits>
#include <string>

#include "core/error.h"

namespace dsv4 {

DSparkDrafter::DSparkDrafter(const Transformer& target, const DSparkWeights& weights)
    : target_(target), c_(target.config()), w_(weights), workspace_(target.backend()), small_(target.backend()),
      pools_(target.backend()) {
  DSV4_CHECK(c_.has_dspark(), "dspark: the model's config has no DSpark drafter (dspark_block_size)");
  DSV4_CHECK(!w_.stages.empty(), "dspark: no stages");
  stages_.reserve(w_.stages.size());
  for (size_t s = 0; s < w_.stages.size(); ++s) {
    const BlockWeights& b = w_.stages[s];
    DSV4_CHECK(b.compress_ratio == 0 && !b.hash_routed, "dspark: stage ", s, " must be window-only and score-routed");
    geometry_.push_back(cache_geometry_for(c_, 0));
    stages_.emplace_back(b, c_, "dspark" + std::to_string(s), s, c_.dspark_block_size);
  }
}

std::unique_ptr<SequenceCache> DSparkDrafter::new_sequence() {
  // Rings never roll back (only verified positions are written); one position of slack keeps the
  // oldest row a draft reads (a row at L-W, L the context's length).
  return std::make_unique<SequenceCache>(pools_, geometry_, /*retain=*/1);
}

void DSparkDrafter::extend_context(std::span<const Context> rows, const Tensor& taps, std::vector<float>* main_x,
                                   Tracer* tracer) {
  small_.reset();
  Pass p(backend(), small_, tracer);
  std::vector<int64_t> picked, unused;
  std::vector<int32_t> tokens;  // (the rows' tokens: not read by this pass)
  for (const Context& r : rows) {
    DSV4_CHECK(r.sequence && r.n >= 0 && r.keep >= 0 && r.keep <= r.n && r.row >= 0 && r.row + r.keep <= taps.rows(),
               "dspark: context of ", r.n, " rows keeping ", r.keep, " from taps row ", r.row, " of ",
               taps.shape_string());
    DSV4_CHECK(taps.cols() == taps_width(), "dspark: taps of ", taps.cols(), " columns, expected ", taps_width());
    const int64_t skip = r.n - r.keep;
    if (skip > 0) {  // rows no draft will read: the length moves past them
      const int64_t to = r.sequence->length() + skip;
      r.sequence->skip_to(to);
      counts_.skipped_context_rows += skip;
    }
    if (r.keep == 0) continue;
    tokens.assign(size_t(r.keep), 0);
    p.add_sequence(r.sequence, tokens, false, /*no_logits=*/true, c_.vocab_size,
                   std::numeric_limits<int64_t>::max(), unused);
    for (int64_t i = 0; i < r.keep; ++i) picked.push_back(r.row + i);
  }
  const int64_t n = p.rows();
  if (main_x) main_x->clear();
  if (n == 0) return;
  Tensor in = taps;
  bool identity = n == taps.rows();
  for (int64_t i = 0; identity && i < n; ++i) identity = picked[size_t(i)] == i;
  if (!identity) {
    in = p.alloc({n, taps.cols()});
    p.be.gather_rows(taps, picked, in);
  }
  p.trace("dspark", "main_hidden", in);
  Tensor x = p.alloc({n, c_.hidden_size});
  p.be.linear(in, w_.main_proj, x);
  p.be.rms_norm(x, w_.main_norm, float(c_.rms_norm_eps), x);
  p.trace("dspark", "main_x", x);
  if (main_x) {
    main_x->resize(size_t(x.numel()));
    p.be.to_host(x, main_x->data());
  }
  // Each stage's ring row: its own wkv and kv_norm of main_x, RoPE at the row's position, FP8 dims.
  for (size_t s = 0; s < stages_.size(); ++s) {
    const Attention& a = stages_[s].attention();
    a.store_key_value(p, a.key_value(p, x, nullptr), s);
  }
  p.commit_sequences();
  counts_.context_rows += n;
}

void DSparkDrafter::draft(std::span<const BlockRequest> blocks, Output& out, Tracer* tracer) {
  DSV4_CHECK(!blocks.empty(), "dspark: draft of no blocks");
  workspace_.reset();
  Pass p(backend(), workspace_, tracer);
  const int64_t B = block_size(), hc = c_.hc_mult, D = c_.hidden_size, V = c_.vocab_size;
  std::vector<int32_t> tokens(size_t(B), int32_t(c_.dspark_noise_token_id));
  std::vector<int64_t> head_rows, unused;
  out.rows_begin.clear();
  for (const BlockRequest& b : blocks) {
    DSV4_CHECK(b.sequence && b.rows >= 1 && b.rows <= B, "dspark: a block of ", B, " rows, ", b.rows, " wanted");
    DSV4_CHECK(b.sequence->length() > 0, "dspark: a draft needs context (the rings are empty)");
    for (size_t i = 0; i < p.sequences.size(); ++i)
      DSV4_CHECK(p.sequences[i] != b.sequence, "dspark: two blocks of one sequence in a draft");
    tokens[0] = b.anchor;
    const int64_t first = p.rows();
    p.add_sequence(b.sequence, tokens, false, /*no_logits=*/true, V, std::numeric_limits<int64_t>::max(), unused);
    out.rows_begin.push_back(int64_t(head_rows.size()));
    for (int64_t k = 0; k < b.rows; ++k) head_rows.push_back(first + k);
  }
  const int64_t n = p.rows(), m = int64_t(head_rows.size());
  Tensor x = p.alloc({n, hc, D});
  p.be.embed(target_.weights().embed, p.tokens, hc, x);
  for (size_t s = 0; s + 1 < stages_.size(); ++s) x = stages_[s].forward(p, x);
  // The last stage's outputs only for the rows whose logits are wanted (every row feeds its attention).
  x = m == n ? stages_.back().forward(p, x) : stages_.back().forward(p, x, head_rows);
  counts_.block_rows += n;

  Tensor h = p.alloc({m, D});
  p.be.hc_head(x, w_.hc_head, float(c_.hc_eps), float(c_.rms_norm_eps), h);
  p.trace("dspark", "head_hidden", h);
  Tensor y = p.alloc({m, D});
  p.be.rms_norm(h, w_.norm, float(c_.rms_norm_eps), y);
  Tensor logits = p.alloc({m, V});
  p.be.linear(y, target_.weights().head, logits, {ActQuant::None, /*round_bf16=*/false});
  out.vocab = V;
  out.base_logits.resize(size_t(m * V));
  p.be.to_host(logits, out.base_logits.data());
  out.head_hidden = h;  // (the workspace keeps it until the next draft)

  // The block's rows are not context: the rings end where they began.
  for (const BlockRequest& b : blocks)
    for (size_t s = 0; s < b.sequence->num_layers(); ++s) b.sequence->layer(s).kv.truncate(b.sequence->length());
}

void DSparkDrafter::markov_bias(std::span<const int32_t> prev, std::vector<float>& host) {
  const int64_t n = int64_t(prev.size()), V = c_.vocab_size;
  host.resize(size_t(n * V));
  if (n == 0) return;
  small_.reset();
  Tensor e = small_.alloc_f32({n, c_.dspark_markov_rank});
  backend().embed(w_.markov_w1, prev, 1, e);
  Tensor bias = small_.alloc_f32({n, V});
  backend().linear(e, w_.markov_w2, bias, {ActQuant::None, /*round_bf16=*/false});
  backend().to_host(bias, host.data());
}

void DSparkDrafter::confidence(const Output& out, std::span<const int64_t> rows, std::span<const int32_t> prev,
                               std::vector<float>& host) {
  DSV4_CHECK(rows.size() == prev.size(), "dspark: confidence of ", rows.size(), " rows with ", prev.size(), " tokens");
  const int64_t n = int64_t(rows.size()), D = c_.hidden_size, r = c_.dspark_markov_rank;
  host.resize(size_t(n));
  if (n == 0) return;
  small_.reset();
  Tensor x = small_.alloc_f32({n, D});
  backend().gather_rows(out.head_hidden, rows, x);
  Tensor e = small_.alloc_f32({n, r});
  backend().embed(w_.markov_w1, prev, 1, e);
  Tensor both = small_.alloc_f32({n, D + r});
  const Tensor parts[] = {x, e};
  backend().concat_cols(parts, both);
  Tensor c = small_.alloc_f32({n, 1});
  backend().linear(both, w_.confidence, c, {ActQuant::None, /*round_bf16=*/false});
  backend().to_host(c, host.data());
}

std::vector<float> DSparkDrafter::ring_rows(SequenceCache& rings, size_t stage, std::span<const int64_t> positions) {
  const int64_t n = int64_t(positions.size()), d = c_.head_dim;
  std::vector<float> host(size_t(n * d));
  if (n == 0) return host;
  small_.reset();
  Tensor rows = small_.alloc_f32({n, d});
  const std::vector<const RowTable*> tables(positions.size(), &rings.layer(stage).kv);
  backend().load_rows(tables, positions, rows);
  backend().to_host(rows, host.data());
  return host;
}

}  // namespace dsv4

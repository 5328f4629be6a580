#include "speculative/dspark_proposer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace dsv4 {

struct DSparkProposer::State final : ProposerState {
  std::unique_ptr<SequenceCache> rings;  // context rows of positions [0, rings->length())
  int64_t bytes_held() const override { return rings->bytes_held(); }
};

DSparkProposer::DSparkProposer(DSparkDrafter& drafter) : drafter_(drafter), chooser_(drafter.vocab()) {}

SequenceCache& DSparkProposer::rings(ProposerState& state) { return *static_cast<State&>(state).rings; }

std::unique_ptr<ProposerState> DSparkProposer::new_state() {
  auto s = std::make_unique<State>();
  s->rings = drafter_.new_sequence();
  return s;
}

int64_t DSparkProposer::bytes_held() const { return drafter_.pools().bytes_held(); }

void DSparkProposer::keep_all_rows(ProposerState& state, bool keep) {
  static_cast<State&>(state).rings->keep_all_rows(keep);
}

// The rings after `length` positions: the rows of the window before it must still be there (a
// prompt writes only its last window's rows, so a cut deep inside a prompt has none).
std::unique_ptr<ProposerState> DSparkProposer::fork(const ProposerState& from, int64_t length) {
  const SequenceCache& rings = *static_cast<const State&>(from).rings;
  if (length < rings.min_truncate_length() || length > rings.length()) return nullptr;
  for (size_t l = 0; l < rings.num_layers(); ++l)
    for (int64_t p = std::max<int64_t>(0, length - drafter_.window()); p < length; ++p)
      if (!rings.layer(l).kv.has_row(p)) return nullptr;
  auto f = std::make_unique<State>();
  f->rings = rings.fork(length);
  return f;
}

bool DSparkProposer::save(const ProposerState& state, StateWriter& w) const {
  write_cache(w, *static_cast<const State&>(state).rings);
  return true;
}

std::unique_ptr<ProposerState> DSparkProposer::load(StateReader& r) {
  auto s = std::make_unique<State>();
  s->rings = drafter_.new_sequence();
  read_cache(r, *s->rings);
  return s;
}

std::unique_ptr<ProposerState> DSparkProposer::state_at(int64_t length) {
  auto s = std::make_unique<State>();
  s->rings = drafter_.new_sequence();
  s->rings->skip_to(length);
  return s;
}

int64_t DSparkProposer::prompt_features_from(int64_t prompt_length) const {
  return std::max<int64_t>(0, prompt_length - drafter_.window());
}

int64_t DSparkProposer::window() const { return drafter_.window(); }

void DSparkProposer::prefill(std::span<const PrefillChunk> chunks, const Tensor& taps) {
  const int64_t W = drafter_.window();
  std::vector<DSparkDrafter::Context> rows;
  for (const PrefillChunk& c : chunks) {
    State& s = static_cast<State&>(*c.state);
    DSV4_CHECK(s.rings->length() == c.first, "dspark proposer: prefill of positions from ", c.first,
               " on rings holding ", s.rings->length());
    // The first draft after this prompt reads positions P-W .. P-1: older rows only advance the
    // rings (the pass computed no taps for them: prompt_features_from).
    const int64_t P = int64_t(c.prompt.size());
    DSV4_CHECK(c.from >= c.first && c.from <= c.first + c.n && c.from <= std::max(c.first, P - W),
               "dspark proposer: no taps for positions [", c.first, ", ", c.from, "), which the first draft reads");
    const int64_t keep = std::clamp<int64_t>(c.first + c.n - std::max(c.from, P - W), 0, c.first + c.n - c.from);
    rows.push_back({s.rings.get(), c.row + (c.first + c.n - c.from - keep), c.n, keep});
  }
  drafter_.extend_context(rows, taps);
}

void DSparkProposer::accept(std::span<const Verified> verified, const Tensor& taps) {
  std::vector<DSparkDrafter::Context> rows;
  for (const Verified& v : verified) {
    State& s = static_cast<State&>(*v.state);
    DSV4_CHECK(v.accepted >= 0 && v.accepted < drafter_.block_size() + 1, "dspark proposer: ", v.accepted,
               " drafts accepted of a block of ", drafter_.block_size());
    rows.push_back({s.rings.get(), v.row, v.accepted + 1, v.accepted + 1});  // the last token and the accepted drafts
  }
  drafter_.extend_context(rows, taps);
}

void DSparkProposer::propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) {
  drafts.assign(requests.size(), Draft{});
  std::vector<DSparkDrafter::BlockRequest> blocks;
  std::vector<size_t> index;  // request of each block
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    if (r.num_drafts <= 0) continue;
    State& s = static_cast<State&>(*r.state);
    DSV4_CHECK(s.rings->length() == r.position + 1 && int64_t(r.context.size()) == r.position + 2,
               "dspark proposer: rings hold ", s.rings->length(), " positions, draft requested at ", r.position,
               " with ", r.context.size(), " tokens of context");
    blocks.push_back({s.rings.get(), r.context.back(), std::min<int64_t>(r.num_drafts, drafter_.block_size())});
    index.push_back(i);
  }
  if (blocks.empty()) return;
  drafter_.draft(blocks, out_);

  // Row by row: row k's Markov bias is that of its input token (the anchor, then draft k).
  const int64_t V = drafter_.vocab();
  std::vector<int32_t> prev(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) prev[b] = blocks[b].anchor;
  std::vector<size_t> active(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) active[b] = b;
  std::vector<int64_t> confidence_rows;   // head rows of the drafts made, and their Markov inputs
  std::vector<int32_t> confidence_prev;
  std::vector<size_t> confidence_block;
  std::vector<int32_t> inputs;
  for (int64_t k = 0; !active.empty(); ++k) {
    inputs.clear();
    for (size_t b : active) inputs.push_back(prev[b]);
    drafter_.markov_bias(inputs, bias_);
    std::vector<size_t> next;
    for (size_t j = 0; j < active.size(); ++j) {
      const size_t b = active[j];
      const DraftRequest& r = requests[index[b]];
      Draft& d = drafts[index[b]];
      const float* base = out_.base_row(b, k);
      const float* bias = bias_.data() + int64_t(j) * V;
      row_.resize(size_t(V));
      for (int64_t v = 0; v < V; ++v) row_[size_t(v)] = base[v] + bias[v];  // fp32, as the reference adds
      const bool greedy = !r.sampling || r.sampling->greedy();
      int32_t token;
      std::vector<float> probs;
      if (!chooser_.choose(row_, r, d.tokens, token, greedy ? nullptr : &probs)) continue;  // the mask allows nothing
      d.tokens.push_back(token);
      if (r.record_logits) d.logits.push_back(row_);
      if (!greedy) d.probs.push_back(std::move(probs));
      confidence_rows.push_back(out_.rows_begin[b] + k);
      confidence_prev.push_back(prev[b]);
      confidence_block.push_back(b);
      prev[b] = token;
      if (int64_t(d.tokens.size()) < blocks[b].rows) next.push_back(b);
    }
    active = std::move(next);
  }
  // Each draft's survival: sigmoid of the confidence logit of the row that chose it.
  drafter_.confidence(out_, confidence_rows, confidence_prev, confidence_);
  for (size_t i = 0; i < confidence_rows.size(); ++i)
    drafts[index[confidence_block[i]]].survival.push_back(float(1.0 / (1.0 + std::exp(-double(confidence_[i])))));
}

}  // namespace dsv4

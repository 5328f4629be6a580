#include "spec/speculative_decoder.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "spec/rejection_sampling.h"

namespace dsv4 {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

struct SpeculativeDecoder::Sequence {
  size_t index = 0;
  std::unique_ptr<SequenceCache> cache;
  std::unique_ptr<ProposerState> draft_state;
  std::vector<int32_t> context;      // prompt + emitted tokens (the last one not yet processed by the target)
  std::vector<float> last_stream;    // the target's streams at the last processed position
  std::mt19937_64 rng;
  SequenceOutput* out = nullptr;
  bool done = false;

  int32_t last() const { return context.back(); }
};

SpeculativeDecoder::SpeculativeDecoder(Transformer& target, DraftProposer* proposer)
    : target_(target), proposer_(proposer) {}

void SpeculativeDecoder::target_distribution(const float* logits, Sequence& s, std::span<const int32_t> extra,
                                             const GenerateOptions& o, std::vector<float>& p) {
  const int64_t V = target_.config().vocab_size;
  std::span<const uint8_t> allowed;
  if (o.mask) {
    context_.assign(s.context.begin(), s.context.end());
    context_.insert(context_.end(), extra.begin(), extra.end());
    allowed_.assign(size_t(V), 0);
    o.mask->allowed_tokens(s.index, context_, allowed_);
    allowed = allowed_;
  }
  sampling_distribution(std::span<const float>(logits, size_t(V)), o.sampling, allowed, p);
}

int32_t SpeculativeDecoder::choose(const float* logits, Sequence& s, std::span<const int32_t> extra,
                                   const GenerateOptions& o) {
  if (o.sampling.greedy() && !o.mask)
    return argmax_token(std::span<const float>(logits, size_t(target_.config().vocab_size)));
  target_distribution(logits, s, extra, o, probs_);
  return o.sampling.greedy() ? int32_t(std::max_element(probs_.begin(), probs_.end()) - probs_.begin())
                             : sample_from(probs_, s.rng);
}

int SpeculativeDecoder::verify(Sequence& s, const Draft& draft, const Transformer::Output& out, size_t request,
                               const GenerateOptions& o, int32_t& next) {
  const int k = int(draft.tokens.size());
  std::span<const int32_t> d(draft.tokens);
  for (int i = 0; i < k; ++i) {
    const float* logits = out.logits_row(request, i);
    const int32_t t = d[size_t(i)];
    if (o.sampling.greedy()) {
      const int32_t c = choose(logits, s, d.first(size_t(i)), o);
      if (t != c) { next = c; return i; }
      continue;
    }
    target_distribution(logits, s, d.first(size_t(i)), o, probs_);
    if (accept_or_resample(probs_, draft.probs[size_t(i)], t, s.rng, next, residual_)) continue;
    return i;
  }
  next = choose(out.logits_row(request, k), s, d, o);  // all accepted: the bonus token
  return k;
}

// Emits tokens in order, stopping at EOS or max_new_tokens exactly where plain decoding would.
void SpeculativeDecoder::emit(Sequence& s, std::span<const int32_t> tokens, bool from_decode) {
  const GenerateOptions& o = *options_;
  size_t n = 0;
  for (int32_t t : tokens) {
    if (s.done) break;
    s.out->tokens.push_back(t);
    s.context.push_back(t);
    ++n;
    if (o.eos && t == *o.eos) s.done = s.out->stopped_at_eos = true;
    if (int64_t(s.out->tokens.size()) >= o.max_new_tokens) s.done = true;
  }
  metrics_.generated_tokens += int64_t(n);
  if (from_decode) metrics_.decode_tokens += int64_t(n);
  if (*on_tokens_ && n) (*on_tokens_)(s.index, tokens.first(n));
}

// The prompts' prefill in one pass: the first token of each sequence, the proposer's rows.
void SpeculativeDecoder::prefill(std::vector<Sequence>& seqs, std::span<const std::vector<int32_t>> prompts) {
  std::vector<Transformer::Request> requests;
  for (Sequence& s : seqs) requests.push_back({s.cache.get(), prompts[s.index], false});
  target_.forward(requests, out_);
  for (Sequence& s : seqs) {
    const int64_t P = int64_t(prompts[s.index].size());
    s.last_stream.assign(out_.hidden_row(s.index, P - 1), out_.hidden_row(s.index, P - 1) + out_.hidden_width);
    if (s.done) continue;
    if (s.draft_state) proposer_->prefill(*s.draft_state, prompts[s.index], out_.hidden_row(s.index, 0));
    const int32_t first = choose(out_.logits_row(s.index), s, {}, *options_);
    emit(s, std::span<const int32_t>(&first, 1), false);
  }
}

// Drafts for the active sequences: at most what can still be emitted after the target's own
// token, and what fits in the context. Fills drafts[sequence]; returns the sequences that drafted.
std::vector<size_t> SpeculativeDecoder::draft(std::vector<Sequence>& seqs, std::span<const size_t> active,
                                              std::vector<Draft>& drafts) {
  const GenerateOptions& o = *options_;
  const int64_t max_positions = target_.config().max_position_embeddings;
  std::vector<DraftRequest> requests;
  std::vector<size_t> drafting;
  std::vector<std::mt19937_64*> rngs;
  for (size_t i : active) {
    Sequence& s = seqs[i];
    const int64_t remaining = o.max_new_tokens - int64_t(s.out->tokens.size());
    const int64_t room = max_positions - s.cache->length() - 1;
    const int n = int(std::min<int64_t>({o.draft_tokens, remaining - 1, room}));
    if (n <= 0) continue;
    requests.push_back({s.draft_state.get(), s.last(), s.last_stream.data(), s.cache->length() - 1, n, i, s.context});
    drafting.push_back(i);
    rngs.push_back(&s.rng);
  }
  drafts.assign(seqs.size(), Draft{});
  if (requests.empty()) return drafting;
  std::vector<Draft> got;
  proposer_->propose(requests, o.sampling, o.mask, rngs, o.record_first_draft_logits, got);
  for (size_t j = 0; j < drafting.size(); ++j) drafts[drafting[j]] = std::move(got[j]);
  return drafting;
}

// One target pass verifying [last, d_1..d_k] of every active sequence, then per sequence:
// accept, emit, roll the target back to the accepted length, and tell the proposer.
void SpeculativeDecoder::verify_step(std::vector<Sequence>& seqs, std::span<const size_t> active,
                                     const std::vector<Draft>& drafts, std::span<const size_t> drafting) {
  const GenerateOptions& o = *options_;
  std::vector<std::vector<int32_t>> tokens(active.size());
  std::vector<Transformer::Request> requests;
  for (size_t r = 0; r < active.size(); ++r) {
    Sequence& s = seqs[active[r]];
    tokens[r].assign(1, s.last());
    tokens[r].insert(tokens[r].end(), drafts[s.index].tokens.begin(), drafts[s.index].tokens.end());
    requests.push_back({s.cache.get(), tokens[r], true});
  }
  target_.forward(requests, out_);
  ++metrics_.passes;

  for (size_t r = 0; r < active.size(); ++r) {
    Sequence& s = seqs[active[r]];
    const Draft& d = drafts[s.index];
    const int64_t L = s.cache->length() - int64_t(tokens[r].size());  // the length before this pass
    if (o.record_first_draft_logits && !d.first_logits.empty())
      s.out->first_draft_logits.emplace_back(L - 1, d.first_logits);
    int32_t next = 0;
    const int a = verify(s, d, out_, r, o, next);
    ++metrics_.sequence_steps;
    metrics_.drafted += int64_t(d.tokens.size());
    metrics_.accepted += a;
    for (size_t j = 0; j < d.tokens.size(); ++j) {
      ++metrics_.drafted_at[j];
      if (int(j) < a) ++metrics_.accepted_at[j];
    }
    s.cache->truncate(L + 1 + a);
    std::vector<int32_t> emitted(d.tokens.begin(), d.tokens.begin() + a);
    emitted.push_back(next);
    emit(s, emitted, true);
    s.last_stream.assign(out_.hidden_row(r, a), out_.hidden_row(r, a) + out_.hidden_width);
    // A sequence that did not draft this step is at its last token or at the context limit.
    const bool proposed = std::find(drafting.begin(), drafting.end(), s.index) != drafting.end();
    if (proposed && !s.done)
      proposer_->accept(*s.draft_state, a, out_.hidden_row(r, 0), std::span<const int32_t>(d.tokens).first(size_t(a)));
  }
}

std::vector<SequenceOutput> SpeculativeDecoder::generate(std::span<const std::vector<int32_t>> prompts,
                                                         const GenerateOptions& o, const TokenCallback& on_tokens) {
  DSV4_CHECK(!prompts.empty(), "generate: no prompts");
  DSV4_CHECK(o.draft_tokens >= 0, "generate: negative draft count");
  DSV4_CHECK(o.draft_tokens == 0 || proposer_, "generate: speculation needs a draft proposer (the checkpoint has no MTP module)");
  DSV4_CHECK(o.max_new_tokens >= 0, "generate: negative max_new_tokens");
  const ModelConfig& c = target_.config();
  options_ = &o;
  on_tokens_ = &on_tokens;
  metrics_ = DecodeMetrics{};
  metrics_.drafted_at.assign(size_t(o.draft_tokens), 0);
  metrics_.accepted_at.assign(size_t(o.draft_tokens), 0);

  std::vector<SequenceOutput> results(prompts.size());
  std::vector<Sequence> seqs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    DSV4_CHECK(!prompts[i].empty(), "prompt ", i, " is empty");
    DSV4_CHECK(int64_t(prompts[i].size()) < c.max_position_embeddings, "prompt ", i, " has ", prompts[i].size(),
               " tokens; the context limit is ", c.max_position_embeddings);
    Sequence& s = seqs[i];
    s.index = i;
    s.cache = target_.new_sequence();
    if (o.draft_tokens > 0) s.draft_state = proposer_->new_state();
    s.context = prompts[i];
    s.rng.seed(o.sampling.seed * 0x9E3779B97F4A7C15ull + i);
    s.out = &results[i];
    s.done = o.max_new_tokens == 0;
    metrics_.prompt_tokens += int64_t(prompts[i].size());
  }

  auto t0 = std::chrono::steady_clock::now();
  prefill(seqs, prompts);
  metrics_.prefill_seconds = seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  std::vector<Draft> drafts;
  for (;;) {
    std::vector<size_t> active;
    for (Sequence& s : seqs) {
      if (!s.done && s.cache->length() + 1 > c.max_position_embeddings) s.done = true;  // no room left
      if (!s.done) active.push_back(s.index);
    }
    if (active.empty()) break;
    const std::vector<size_t> drafting = draft(seqs, active, drafts);
    verify_step(seqs, active, drafts, drafting);
  }
  metrics_.decode_seconds = seconds_since(t0);
  return results;
}

}  // namespace dsv4

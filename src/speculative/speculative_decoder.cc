#include "speculative/speculative_decoder.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "speculative/decoder_sequence.h"
#include "speculative/rejection_sampling.h"

namespace dsv4 {

SpeculativeDecoder::SpeculativeDecoder(Transformer& target, DraftProposer* proposer)
    : target_(target), proposer_(proposer) {
  // The scheduler measures every pass from the start (plain traffic too), so that an auto
  // sequence arriving later finds the costs known.
  if (proposer_)
    scheduler_ = std::make_unique<VerifyScheduler>(VerifyScheduler::Options{
        proposer_->max_drafts() > 0 ? proposer_->max_drafts() : int(target_.options().max_rollback - 1),
        proposer_->draft_cost(), /*probe_every=*/8, proposer_->window()});
}

SpeculativeDecoder::~SpeculativeDecoder() = default;

void SpeculativeDecoder::set_prefill_chunk(int64_t tokens) {
  DSV4_CHECK(tokens > 0, "prefill chunk must be positive, got ", tokens);
  prefill_chunk_ = tokens;
}

SpeculativeDecoder::Sequence& SpeculativeDecoder::get(SequenceId id) const {
  auto it = sequences_.find(id);
  DSV4_CHECK(it != sequences_.end(), "decoder: no sequence ", id);
  return *it->second;
}

const SequenceOutput& SpeculativeDecoder::output(SequenceId id) const { return get(id).out; }
bool SpeculativeDecoder::finished(SequenceId id) const { return get(id).done; }
int64_t SpeculativeDecoder::length(SequenceId id) const { return int64_t(get(id).context.size()); }

bool SpeculativeDecoder::idle() const {
  return std::all_of(sequences_.begin(), sequences_.end(), [](const auto& kv) { return kv.second->done; });
}

void SpeculativeDecoder::check_tokens(std::span<const int32_t> tokens, int64_t first, const char* what) const {
  const ModelConfig& c = target_.config();
  DSV4_CHECK(!tokens.empty(), "the ", what, " is empty");
  for (size_t i = 0; i < tokens.size(); ++i)
    DSV4_CHECK(tokens[i] >= 0 && tokens[i] < c.vocab_size, what, " token ", i, " is ", tokens[i],
               ", outside the vocabulary [0, ", c.vocab_size, ")");
  DSV4_CHECK(first + int64_t(tokens.size()) < c.max_position_embeddings, "the ", what, " brings the sequence to ",
             first + int64_t(tokens.size()), " tokens; the context limit is ", c.max_position_embeddings);
}

void SpeculativeDecoder::check_options(const GenerateOptions& o) const {
  DSV4_CHECK(o.draft_tokens >= 0, "negative draft count ", o.draft_tokens);
  DSV4_CHECK(o.draft_tokens == 0 || proposer_,
             "speculation needs a draft proposer (the checkpoint has no MTP module, or it was not loaded)");
  DSV4_CHECK(o.draft_tokens + 1 <= target_.options().max_rollback, "draft length ", o.draft_tokens,
             " needs rollbacks of ", o.draft_tokens + 1, " tokens; the caches keep ", target_.options().max_rollback);
  DSV4_CHECK(!proposer_ || proposer_->max_drafts() == 0 || o.draft_tokens <= proposer_->max_drafts(),
             "draft length ", o.draft_tokens, " exceeds what the drafter proposes per step (",
             proposer_ ? proposer_->max_drafts() : 0, ": its block)");
  DSV4_CHECK(!o.draft_auto || o.draft_tokens > 0, "automatic draft length needs a positive maximum (draft_tokens)");
  DSV4_CHECK(o.max_new_tokens >= 0, "negative max_new_tokens ", o.max_new_tokens);
}

SpeculativeDecoder::SequenceId SpeculativeDecoder::add(std::vector<int32_t> prompt, const GenerateOptions& o) {
  check_tokens(prompt, 0, "prompt");
  check_options(o);
  auto s = std::make_unique<Sequence>();
  s->id = next_id_++;
  s->mask_sequence = size_t(s->id);
  s->options = o;
  s->rng.seed(o.sampling.seed);
  s->context = prompt;
  s->prompt = std::move(prompt);
  metrics_.prompt_tokens += int64_t(s->context.size());
  if (o.max_new_tokens == 0) {
    s->done = true;
    s->out.finish = FinishReason::Length;
  }
  const SequenceId id = s->id;
  sequences_.emplace(id, std::move(s));
  return id;
}

SpeculativeDecoder::SequenceId SpeculativeDecoder::add(std::vector<int32_t> prompt, const GenerateOptions& o,
                                                       const PrefixSource& from, int64_t cut) {
  DSV4_CHECK(from.cache && cut >= 0 && cut < int64_t(prompt.size()) && cut <= from.cache->length() &&
                 from.cache->length() < int64_t(from.tokens.size()),
             "decoder: a start from ", cut, " tokens of a state holding ", from.tokens.size(), " (caches: ",
             from.cache ? from.cache->length() : 0, ") for a prompt of ", prompt.size());
  DSV4_CHECK(std::equal(prompt.begin(), prompt.begin() + cut + 1, from.tokens.begin()),
             "decoder: the prompt's first ", cut + 1, " tokens are not the state's");
  const SequenceId id = add(std::move(prompt), o);
  Sequence& s = get(id);
  if (cut == 0 || s.done || cut < from.cache->min_truncate_length()) return id;
  // (Decided now, not at its first step: a drafter that starts late needs no rows before the cut.)
  s.late_drafter = starts_drafter_late(s, unfinished());
  s.late_decided = true;
  std::unique_ptr<ProposerState> draft;
  if (wants_draft_state(o)) {
    if (from.draft) draft = proposer_->fork(*from.draft, cut);
    if (draft) s.late_drafter = false;  // the window before the cut comes with the fork
    if (!draft && !s.late_drafter) {
      // The source's drafter rows before the cut are gone (a long prompt computes only its last
      // window's): a new drafter state starts where the rest of this prompt gives it the window
      // its first draft reads — at the cut, or before it when the rest is shorter than that.
      const int64_t at = std::min(cut, proposer_->prompt_features_from(int64_t(s.prompt.size())));
      if (at <= 0 || at < from.cache->min_truncate_length() || !(draft = proposer_->state_at(at))) return id;
      cut = at;
    }
    if (o.reusable && draft) proposer_->keep_all_rows(*draft);
  }
  s.cache = from.cache->fork(cut);
  if (o.reusable) s.cache->keep_all_rows();
  s.draft_state = std::move(draft);
  s.prefilled = s.reused = cut;
  return id;
}

int64_t SpeculativeDecoder::reused(SequenceId id) const { return get(id).reused; }

PrefixSource SpeculativeDecoder::source(SequenceId id) const {
  const Sequence& s = get(id);
  if (!s.cache) return {};
  return {s.context, s.cache.get(), s.draft_state.get()};
}

SequenceState SpeculativeDecoder::take_state(SequenceId id) {
  Sequence& s = get(id);
  SequenceState state;
  if (!s.cache) return state;
  state.tokens = s.context;
  state.cache = std::move(s.cache);
  state.draft = std::move(s.draft_state);
  if (!s.done) finish(s, FinishReason::Cancelled);
  return state;
}

int64_t SpeculativeDecoder::bytes_held() const {
  return target_.pools().bytes_held() + (proposer_ ? proposer_->bytes_held() : 0);
}

void SpeculativeDecoder::stop_keeping_rows() {
  for (auto& [id, s] : sequences_) {
    if (s->done) continue;
    s->options.reusable = false;
    if (s->cache) s->cache->keep_all_rows(false);
    if (s->draft_state) proposer_->keep_all_rows(*s->draft_state, false);
  }
}

void SpeculativeDecoder::save_state(const PrefixSource& state, StateWriter& w) const {
  DSV4_CHECK(state.cache, "decoder: saving an empty state");
  w.put_ints(std::vector<int32_t>(state.tokens.begin(), state.tokens.end()));
  write_cache(w, *state.cache);
  // The proposer's state last: a reader without a proposer skips it (the checksum still covers it).
  w.put<uint8_t>(state.draft && proposer_ ? 1 : 0);
  if (state.draft && proposer_) proposer_->save(*state.draft, w);
}

SequenceState SpeculativeDecoder::load_state(StateReader& r) {
  SequenceState s;
  s.tokens = r.get_ints(target_.config().max_position_embeddings + 1);
  s.cache = target_.new_sequence();
  read_cache(r, *s.cache);
  DSV4_CHECK(s.cache->length() < int64_t(s.tokens.size()), r.path().string(), ": a state of ", s.cache->length(),
             " rows and ", s.tokens.size(), " tokens");
  for (int32_t t : s.tokens)
    DSV4_CHECK(t >= 0 && t < target_.config().vocab_size, r.path().string(), ": token ", t, " outside the vocabulary");
  if (r.get<uint8_t>() != 0) {
    if (proposer_) s.draft = proposer_->load(r);
    else r.skip_to_checksum();
  }
  r.finish();
  return s;
}

int64_t SpeculativeDecoder::running_bytes() const {
  int64_t total = 0;
  for (const auto& [id, s] : sequences_) {
    if (s->done) continue;
    if (s->cache) total += s->cache->bytes_held();
    if (s->draft_state) total += s->draft_state->bytes_held();
  }
  return total;
}

void SpeculativeDecoder::extend(SequenceId id, std::span<const int32_t> tokens, const GenerateOptions& o) {
  Sequence& s = get(id);
  DSV4_CHECK(s.done, "decoder: sequence ", id, " is still running");
  DSV4_CHECK(s.cache, "decoder: sequence ", id, " did not keep its state (GenerateOptions::keep_state) or was ",
             "cancelled; add it again");
  check_tokens(tokens, int64_t(s.context.size()), "continuation");
  check_options(o);
  DSV4_CHECK(o.draft_tokens == 0 || s.draft_state,
             "decoder: sequence ", id, " began without speculation; it cannot draft now");
  s.options = o;
  s.rng.seed(o.sampling.seed);
  s.context.insert(s.context.end(), tokens.begin(), tokens.end());
  s.prompt = s.context;                // the whole sequence: its first cache->length() tokens are processed
  s.prefilled = s.cache->length();
  s.out = SequenceOutput{};
  s.done = false;
  metrics_.prompt_tokens += int64_t(tokens.size());
  if (o.max_new_tokens == 0) finish(s, FinishReason::Length);
}

void SpeculativeDecoder::finish(Sequence& s, FinishReason why) {
  s.done = true;
  if (s.out.finish == FinishReason::None) s.out.finish = why;
  if (s.options.keep_state && (why == FinishReason::Eos || why == FinishReason::Length)) {
    // Drafts accepted past where it stopped (EOS, the length) left rows of tokens it never
    // emitted: the kept state is that of its tokens, the last one not passed yet.
    const int64_t held = int64_t(s.context.size()) - 1;
    if (s.cache && s.cache->length() > held) {
      s.cache->truncate(held);
      if (s.draft_state) s.draft_state = proposer_->fork(*s.draft_state, held);
    }
    return;
  }
  s.cache.reset();  // blocks back to the pools
  s.draft_state.reset();
}

void SpeculativeDecoder::cancel(SequenceId id) {
  Sequence& s = get(id);
  if (!s.done) finish(s, FinishReason::Cancelled);
  s.cache.reset();  // a kept state too
  s.draft_state.reset();
}

SequenceOutput SpeculativeDecoder::release(SequenceId id) {
  Sequence& s = get(id);
  DSV4_CHECK(s.done, "decoder: sequence ", id, " is still running (cancel it first)");
  SequenceOutput out = std::move(s.out);
  sequences_.erase(id);
  return out;
}

// The tokens the sequence's mask allows after context + extra (empty: no mask, all allowed).
std::span<const uint64_t> SpeculativeDecoder::allowed_after(Sequence& s, std::span<const int32_t> extra) {
  if (!s.options.mask) return {};
  context_.assign(s.context.begin(), s.context.end());
  context_.insert(context_.end(), extra.begin(), extra.end());
  allowed_.resize(mask_words(size_t(target_.config().vocab_size)));
  s.options.mask->allowed_tokens(s.mask_sequence, context_, allowed_);
  return allowed_;
}

void SpeculativeDecoder::target_distribution(const float* logits, Sequence& s, std::span<const int32_t> extra,
                                             std::vector<float>& p) {
  const std::span<const uint64_t> allowed = allowed_after(s, extra);
  sampling_distribution(std::span<const float>(logits, size_t(target_.config().vocab_size)), s.options.sampling,
                        allowed, p);
}

// Whether the sequence reads its target logits only for their argmax: greedy, no mask over the
// vocabulary, no logprobs, no step records (the pass may then take the bounded head).
bool SpeculativeDecoder::argmax_only(const Sequence& s) {
  const GenerateOptions& o = s.options;
  return o.sampling.greedy() && !o.mask && o.top_logprobs < 0 && !o.record_steps;
}

// The target's token after context + extra.
int32_t SpeculativeDecoder::choose(const float* logits, Sequence& s, std::span<const int32_t> extra) {
  const SamplingParams& sp = s.options.sampling;
  if (sp.greedy())  // the masked argmax directly: no distribution over the vocabulary to build
    return argmax_token(std::span<const float>(logits, size_t(target_.config().vocab_size)), allowed_after(s, extra));
  target_distribution(logits, s, extra, probs_);
  return sample_from(probs_, s.rng);
}

// Verifies one sequence's drafts against its verification rows; returns the accepted
// count and sets the next token (the target's correction, or the bonus token).
int SpeculativeDecoder::verify(Sequence& s, const Draft& draft, const float* rows, int32_t& next) {
  const int64_t V = target_.config().vocab_size;
  const int k = int(draft.tokens.size());
  std::span<const int32_t> d(draft.tokens);
  for (int i = 0; i < k; ++i) {
    const float* logits = rows + i * V;
    const int32_t t = d[size_t(i)];
    if (s.options.sampling.greedy()) {
      const int32_t c = choose(logits, s, d.first(size_t(i)));
      if (t != c) { next = c; return i; }
      continue;
    }
    target_distribution(logits, s, d.first(size_t(i)), probs_);
    if (!accept_or_resample(probs_, draft.probs[size_t(i)], t, s.rng, next, residual_)) return i;
  }
  next = choose(rows + k * V, s, d);  // all accepted: the bonus token
  return k;
}

// Emits tokens in order, stopping at EOS or max_new_tokens exactly where plain decoding would.
void SpeculativeDecoder::emit(Sequence& s, std::span<const int32_t> tokens, bool from_decode,
                              std::vector<Event>& events) {
  const GenerateOptions& o = s.options;
  Event e{s.id, s.out.tokens.size(), 0, false};
  for (int32_t t : tokens) {
    if (s.done) break;
    s.out.tokens.push_back(t);
    s.context.push_back(t);
    ++e.count;
    if (o.eos && t == *o.eos) {
      s.out.stopped_at_eos = true;
      finish(s, FinishReason::Eos);
    } else if (int64_t(s.out.tokens.size()) >= o.max_new_tokens) {
      finish(s, FinishReason::Length);
    }
  }
  metrics_.generated_tokens += int64_t(e.count);
  if (from_decode) metrics_.decode_tokens += int64_t(e.count);
  e.finished = s.done;
  if (e.count || e.finished) events.push_back(e);
}

// Logprobs of the tokens emitted from index `first` on; token first + j was chosen or verified
// by logits row j of `rows`.
void SpeculativeDecoder::record_logprobs(Sequence& s, const float* rows, size_t first) {
  if (s.options.top_logprobs < 0) return;
  const size_t V = size_t(target_.config().vocab_size);
  const size_t top = std::min<size_t>(size_t(s.options.top_logprobs), V);
  std::vector<int32_t> order;
  for (size_t i = first; i < s.out.tokens.size(); ++i) {
    const float* row = rows + (i - first) * V;
    const float peak = *std::max_element(row, row + V);
    double sum = 0;
    for (size_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - peak);
    const double log_z = double(peak) + std::log(sum);
    TokenLogprobs lp{float(double(row[s.out.tokens[i]]) - log_z), {}};
    order.resize(V);
    for (size_t v = 0; v < V; ++v) order[v] = int32_t(v);
    std::partial_sort(order.begin(), order.begin() + long(top), order.end(),
                      [row](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    for (size_t j = 0; j < top; ++j) lp.top.emplace_back(order[j], float(double(row[order[j]]) - log_z));
    s.out.logprobs.push_back(std::move(lp));
  }
}

// Verifies a sequence's drafts against its rows of the pass and rolls the target back to the
// accepted length; returns the accepted count and sets the token that follows them.
int SpeculativeDecoder::judge(Sequence& s, const Draft& d, size_t request, int32_t& next) {
  const int n = int(d.tokens.size());
  const int64_t L = s.cache->length() - (n + 1);  // the length before this pass
  const float* rows = out_.logits_row(request);
  const int a = verify(s, d, rows, next);
  if (s.options.record_steps) {
    StepRecord r{L, d.tokens, a, {}, {}};
    r.target_logits.assign(rows, rows + (n + 1) * out_.vocab);
    for (const auto& l : d.logits) r.draft_logits.insert(r.draft_logits.end(), l.begin(), l.end());
    s.out.steps.push_back(std::move(r));
  }
  metrics_.record_step(n, a);
  s.out.drafted += n;
  s.out.accepted += a;
  if (scheduler_ && n > 0) scheduler_->record_step(s.acceptance, n, a, d.survival);
  s.cache->truncate(L + 1 + a);
  return a;
}

std::vector<SpeculativeDecoder::Event> SpeculativeDecoder::step() {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t max_positions = target_.config().max_position_embeddings;
  std::vector<Event> events;
  std::vector<Sequence*> fresh, running;
  for (auto& [id, s] : sequences_) {
    if (s->done) continue;
    if (!s->prompt.empty()) fresh.push_back(s.get());
    else if (s->cache->length() + 1 > max_positions) {
      finish(*s, FinishReason::ContextFull);
      events.push_back({s->id, s->out.tokens.size(), 0, true});
    } else {
      running.push_back(s.get());
    }
  }
  if (fresh.empty() && running.empty()) return events;

  std::vector<Draft> drafts;
  const double before_draft = seconds_since(t0);
  if (!running.empty()) draft(running, drafts);
  // The proposer reads the target's streams of every row of a sequence it drafts for; for the
  // others the last block computes only the rows whose logits are read.
  auto drafts_from = [this](const Sequence& s) { return s.draft_state || wants_draft_state(s.options); };

  // One target pass: the next chunk of each new prompt, then [last, d_1..d_n] of every running sequence.
  std::vector<std::vector<int32_t>> verify_tokens(running.size());
  std::vector<Transformer::Request> requests;
  std::vector<std::pair<int64_t, int64_t>> chunks;  // [first, first + n) of each fresh prompt
  for (Sequence* s : fresh) {
    if (!s->late_decided) {  // where its drafter starts, knowing the batch it joins
      s->late_drafter = starts_drafter_late(*s, int64_t(fresh.size() + running.size()));
      s->late_decided = true;
    }
    if (!s->cache) {
      s->cache = target_.new_sequence();
      if (s->options.reusable) s->cache->keep_all_rows();
    }
    const int64_t P = int64_t(s->prompt.size()), n = std::min(prefill_chunk_, P - s->prefilled);
    chunks.emplace_back(s->prefilled, n);
    const bool last = s->prefilled + n == P;
    // The proposer reads the features of the prompt's last rows only (a window-only drafter); a
    // late-started one only its last row's (the logits row's: free).
    const int64_t skip = !drafts_from(*s)   ? 0
                         : s->late_drafter ? n - (last ? 1 : 0)
                                           : std::clamp(proposer_->prompt_features_from(P) - s->prefilled, int64_t(0), n);
    requests.push_back({s->cache.get(), std::span<const int32_t>(s->prompt).subspan(size_t(s->prefilled), size_t(n)),
                        false, /*no_logits=*/!last, /*prompt=*/true, /*streams=*/drafts_from(*s),
                        /*argmax_only=*/argmax_only(*s), /*streams_from=*/skip});
  }
  for (size_t r = 0; r < running.size(); ++r) {
    verify_tokens[r].assign(1, running[r]->last());
    verify_tokens[r].insert(verify_tokens[r].end(), drafts[r].tokens.begin(), drafts[r].tokens.end());
    requests.push_back({running[r]->cache.get(), verify_tokens[r], true, false, false,
                        /*streams=*/drafts_from(*running[r]), /*argmax_only=*/argmax_only(*running[r])});
  }
  if (prefill_progress_) {  // a prompt's first chunk: its start (the clock of its rate)
    int64_t total = 0;
    bool starting = false;
    for (size_t i = 0; i < fresh.size(); ++i) {
      total += int64_t(fresh[i]->prompt.size());
      starting = starting || chunks[i].first == 0;
    }
    if (starting) prefill_progress_(0, total);
  }
  const auto pass_start = std::chrono::steady_clock::now();
  target_.forward(requests, out_);
  if (scheduler_ && !running.empty()) scheduler_->record_batch(int64_t(running.size()));
  if (scheduler_ && (fresh.empty() || running.empty())) {  // (a mixed pass says nothing of either's cost)
    int64_t rows = 0;
    for (const auto& r : requests) rows += int64_t(r.tokens.size());
    if (fresh.empty()) scheduler_->record_pass(rows, seconds_since(pass_start));
    else scheduler_->record_prompt_pass(rows, seconds_since(pass_start));
  }
  const auto pass_end = std::chrono::steady_clock::now();
  if (!running.empty()) ++metrics_.passes;

  // The verdicts, then the proposer told about every sequence of the pass at once (its streams
  // never leave backend memory), then the tokens emitted (which may finish a sequence).
  std::vector<PrefillChunk> prefilled;
  std::vector<Verified> verified;
  for (size_t i = 0; i < fresh.size(); ++i) {
    Sequence& s = *fresh[i];
    const int64_t P = int64_t(s.prompt.size());
    metrics_.prefill_rows += chunks[i].second;
    if (s.late_drafter) {  // the drafter starts at the prompt's last row, told of that row alone
      if (chunks[i].first + chunks[i].second < P) continue;
      s.draft_state = proposer_->state_at(P - 1);
      DSV4_CHECK(s.draft_state, "decoder: the proposer cannot start a drafter at position ", P - 1);
      if (s.options.reusable) proposer_->keep_all_rows(*s.draft_state);
      s.late_drafter = false;
      s.draft_from = P - 1 + proposer_->window();
      ++metrics_.late_drafters;
      prefilled.push_back({s.draft_state.get(), s.prompt, P - 1, 1, out_.rows_begin[i], P - 1, /*defer=*/true});
    } else {
      if (wants_draft_state(s.options) && !s.draft_state) {
        s.draft_state = proposer_->new_state();
        if (s.options.reusable) proposer_->keep_all_rows(*s.draft_state);
      }
      // An auto sequence leaves its drafter's prompt rows until its first draft (it may never
      // draft), except while the scheduler calibrates: then a sequence's first step drafts, and
      // the rows are prompt work, computed with the prompt as for a fixed K.
      const bool defer = s.options.draft_auto && !(scheduler_ && scheduler_->calibrating());
      if (s.draft_state) prefilled.push_back({s.draft_state.get(), s.prompt, chunks[i].first, chunks[i].second,
                                              out_.rows_begin[i], chunks[i].first + requests[i].streams_from, defer});
    }
  }
  std::vector<int> accepted(running.size());
  std::vector<int32_t> next(running.size());
  for (size_t r = 0; r < running.size(); ++r) {
    Sequence& s = *running[r];
    accepted[r] = judge(s, drafts[r], fresh.size() + r, next[r]);
    if (s.draft_state) verified.push_back({s.draft_state.get(), accepted[r], out_.rows_begin[fresh.size() + r]});
  }
  if (proposer_ && (!prefilled.empty() || !verified.empty())) {
    const Tensor& features = proposer_->features() == TargetFeatures::Taps ? out_.taps : out_.hidden;
    if (!prefilled.empty()) proposer_->prefill(prefilled, features);
    if (!verified.empty()) proposer_->accept(verified, features);
  }

  if (prefill_progress_ && !fresh.empty()) {
    int64_t done = 0, total = 0;
    for (size_t i = 0; i < fresh.size(); ++i) {
      done += chunks[i].first + chunks[i].second;
      total += int64_t(fresh[i]->prompt.size());
    }
    prefill_progress_(done, total);
  }
  for (size_t i = 0; i < fresh.size(); ++i) {  // a prompt's last chunk yields its first token
    Sequence& s = *fresh[i];
    s.prefilled = chunks[i].first + chunks[i].second;
    if (s.prefilled < int64_t(s.prompt.size())) continue;
    s.prompt = {};
    const int32_t token = choose(out_.logits_row(i), s, {});
    const size_t before = s.out.tokens.size();
    emit(s, std::span<const int32_t>(&token, 1), false, events);
    record_logprobs(s, out_.logits_row(i), before);
  }
  for (size_t r = 0; r < running.size(); ++r) {
    const Draft& d = drafts[r];
    std::vector<int32_t> emitted(d.tokens.begin(), d.tokens.begin() + accepted[r]);
    emitted.push_back(next[r]);
    const size_t before = running[r]->out.tokens.size();
    emit(*running[r], emitted, true, events);
    record_logprobs(*running[r], out_.logits_row(fresh.size() + r), before);
  }
  if (scheduler_ && fresh.empty()) scheduler_->record_overhead(before_draft + seconds_since(pass_end));
  (running.empty() ? metrics_.prefill_seconds : metrics_.decode_seconds) += seconds_since(t0);
  return events;
}

std::vector<SequenceOutput> SpeculativeDecoder::generate(std::span<const std::vector<int32_t>> prompts,
                                                         const GenerateOptions& o, const TokenCallback& on_tokens) {
  DSV4_CHECK(!prompts.empty(), "generate: no prompts");
  DSV4_CHECK(idle(), "generate: the decoder has unfinished sequences");
  reset_metrics();
  std::map<SequenceId, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerateOptions oi = o;
    oi.sampling.seed = o.sampling.seed * 0x9E3779B97F4A7C15ull + i;  // one stream per sequence
    try {
      const SequenceId id = add(prompts[i], oi);
      get(id).mask_sequence = i;
      index[id] = i;
    } catch (const Error& e) {
      for (auto& [id, unused] : index) { cancel(id); release(id); }
      throw Error(cat("prompt ", i, ": ", e.what()));
    }
  }
  while (!idle())
    for (const Event& e : step())
      if (on_tokens && e.count)
        on_tokens(index.at(e.id), std::span(output(e.id).tokens).subspan(e.first, e.count));
  std::vector<SequenceOutput> results(prompts.size());
  for (auto& [id, i] : index) results[i] = release(id);
  return results;
}

}  // namespace dsv4

// Generation with speculative decoding (spec §4), step by step over caller-owned sequences.
//
// Per step, for every running sequence: the proposer drafts up to k tokens, the target
// verifies [last, d_1..d_k] in one pass (all sequences together, ragged), the longest
// acceptable prefix is kept plus one token of the target's own, and both states roll back
// to the accepted length. Sequences added since the last step are prefilled in the same
// target pass, a chunk of their prompt per step (so memory does not grow with the prompt,
// and a long prompt does not stall the others). Each sequence has its own draft length,
// sampling, mask and limits.
//
// Greedy mode accepts a draft when it equals the target's argmax, so the output is
// token-identical to plain greedy decoding. Sampling mode uses speculative rejection
// sampling (accept d with probability min(1, p(d)/q(d)), else draw from max(0, p − q)),
// so every emitted token has the target's distribution. k = 0 is plain decoding.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "model/transformer.h"
#include "speculative/decode_metrics.h"
#include "speculative/proposer.h"
#include "speculative/verify_scheduler.h"

namespace dsv4 {

struct GenerateOptions {
  int64_t max_new_tokens = 64;
  int draft_tokens = 0;                  // k; 0 = no speculation
  // Speculation that decides for itself: each step verifies as many of up to `draft_tokens` drafts
  // as maximize the expected tokens per second (verify_scheduler.h), none where drafting does not pay.
  bool draft_auto = false;
  SamplingParams sampling;               // seed: the sequence's random stream
  std::optional<int32_t> eos;            // stop after emitting this token
  const TokenMask* mask = nullptr;
  bool record_steps = false;             // keep every step's verification and draft logits (tests)
  int top_logprobs = -1;                 // -1: no logprobs; 0..20: each token's logprob + that many alternatives
  // A sequence that finishes (EOS or length) keeps its caches until cancel() or release(), so
  // that extend() can continue it (a chat's next turn) without prefilling it again.
  bool keep_state = false;
  // Keeps every row of the sequence's caches, and a proposer state even without drafting, so that
  // the prefix cache can start other sequences from it cut at any length (SequenceCache::keep_all_rows).
  bool reusable = false;
};

enum class FinishReason { None, Eos, Length, ContextFull, Cancelled };

// One verification step of a sequence, recorded with GenerateOptions::record_steps.
struct StepRecord {
  int64_t position = 0;                  // position of the first verified row (the last token)
  std::vector<int32_t> drafts;           // d_1..d_n (n ≤ k)
  int accepted = 0;
  std::vector<float> target_logits;      // [n + 1, V]: every row of the verification pass
  std::vector<float> draft_logits;       // [n, draft vocab]: the MTP logits that chose each draft
};

// A generated token's log-probability under the target's distribution at its position
// (log_softmax of the raw logits row that chose or verified it: no temperature, no mask),
// with the `top_logprobs` most likely tokens there, most likely first (ties: lowest id).
struct TokenLogprobs {
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};

struct SequenceOutput {
  std::vector<int32_t> tokens;           // generated tokens (EOS included when it stopped there)
  FinishReason finish = FinishReason::None;
  bool stopped_at_eos = false;
  int64_t drafted = 0, accepted = 0;     // drafts this sequence verified, and accepted
  std::vector<StepRecord> steps;         // with record_steps
  std::vector<TokenLogprobs> logprobs;   // one per token, with top_logprobs >= 0
};

// A sequence's state as the prefix cache keeps it: the tokens its caches hold, the target's
// caches and the proposer's state (null without one).
struct SequenceState {
  std::vector<int32_t> tokens;          // every token the state has read: the caches hold the first length()
  std::unique_ptr<SequenceCache> cache;
  std::unique_ptr<ProposerState> draft;
  int64_t length() const { return cache ? cache->length() : 0; }
};

// A state a sequence can start from: a kept one, or a live sequence's (valid until the next step).
struct PrefixSource {
  std::span<const int32_t> tokens;      // those it has read (its caches hold the first cache->length())
  const SequenceCache* cache = nullptr;
  const ProposerState* draft = nullptr;
};
inline PrefixSource view(const SequenceState& s) { return {s.tokens, s.cache.get(), s.draft.get()}; }

class SpeculativeDecoder {
 public:
  using SequenceId = uint64_t;

  // `proposer` may be null: then every sequence decodes plainly (draft_tokens must be 0).
  SpeculativeDecoder(Transformer& target, DraftProposer* proposer);
  ~SpeculativeDecoder();

  // Prompt tokens a sequence prefills per step (its last chunk yields its first token).
  // Any size gives the same bits (the backend is batch-invariant); it bounds the working set.
  static constexpr int64_t kDefaultPrefillChunk = 512;
  void set_prefill_chunk(int64_t tokens);
  int64_t prefill_chunk() const { return prefill_chunk_; }
  // Told, after every step that prefilled prompt chunks, the prompt tokens those prompts have
  // had processed and their total (a long prompt's prefill takes minutes on a CPU).
  void set_prefill_progress(std::function<void(int64_t done, int64_t total)> progress) {
    prefill_progress_ = std::move(progress);
  }

  // Adds a sequence; it is prefilled by the next step(). Ids count up from 0. Throws (and
  // adds nothing) for an empty prompt, an unknown token id, a prompt that leaves no room
  // in the context, or a draft length the caches cannot roll back.
  SequenceId add(std::vector<int32_t> prompt, const GenerateOptions& options);
  // The same, starting from `from`'s state after its first `cut` tokens, which with the next one
  // must be the prompt's own (checked; cut < prompt size), and prefilling only the rest: bit for
  // bit what add() gives. Cold (nothing reused) where `from` does not hold that state any more, or
  // the sequence needs a proposer state `from` cannot give at the cut. reused(id): the tokens reused.
  SequenceId add(std::vector<int32_t> prompt, const GenerateOptions& options, const PrefixSource& from,
                 int64_t cut);
  int64_t reused(SequenceId id) const;
  // A live sequence (running, or finished with its state kept) as a source.
  PrefixSource source(SequenceId id) const;
  // Stops the sequence where it is (if running: finish Cancelled) and takes its state; its output
  // stays readable until release().
  SequenceState take_state(SequenceId id);
  // Bytes of cache blocks held: by everything (the target's pools and the proposer's), and by the
  // sequences not finished (blocks they share with others counted in full).
  int64_t bytes_held() const;
  int64_t running_bytes() const;
  // Memory pressure: the running sequences stop keeping rows no rollback needs (GenerateOptions::
  // reusable), from their next pass on; the prefix cache can then cut them only near their end.
  void stop_keeping_rows();
  // The disk tier: a state's tokens, the target's caches and the proposer's state written as
  // stored; read back as this decoder's (throws naming the file where it does not fit: another
  // model, a truncated or corrupted file). A state read without this decoder's proposer, or
  // written without one, comes back without a proposer state.
  void save_state(const PrefixSource& state, StateWriter& w) const;
  SequenceState load_state(StateReader& r);

  // Continues a finished sequence that kept its state (GenerateOptions::keep_state): `tokens`
  // follow everything it holds (prompt and output), the next step() prefills them from where
  // its caches end, and generation goes on under `options` with a fresh output. Its draft
  // length may change, but speculation cannot start on a sequence that began without it.
  // Throws (changing nothing) when the sequence is running, did not keep its state, or the
  // tokens are empty, unknown or beyond the context.
  void extend(SequenceId id, std::span<const int32_t> tokens, const GenerateOptions& options);

  // Sequences whose tokens grew in a step.
  struct Event {
    SequenceId id;
    size_t first = 0, count = 0;         // output(id).tokens[first, first + count) are new
    bool finished = false;
  };
  // One step over every sequence that is not finished: prefill of the new ones, one
  // draft + verify pass of the others. Returns what each sequence gained.
  std::vector<Event> step();

  bool idle() const;                             // nothing left to step
  const SequenceOutput& output(SequenceId id) const;
  bool finished(SequenceId id) const;
  int64_t length(SequenceId id) const;           // its tokens so far: prompt (and continuations) + output
  // Stops a sequence and releases its cache blocks (its tokens so far stay readable).
  void cancel(SequenceId id);
  // Forgets a finished or cancelled sequence and returns its output.
  SequenceOutput release(SequenceId id);

  // Called with each sequence's newly emitted tokens as they are accepted (streaming);
  // `sequence` is the prompt's index.
  using TokenCallback = std::function<void(size_t sequence, std::span<const int32_t> tokens)>;
  // Adds the prompts (sequence i drawing from seed mix(options.sampling.seed, i)), steps
  // until all finish, returns their outputs. The decoder must be idle.
  std::vector<SequenceOutput> generate(std::span<const std::vector<int32_t>> prompts, const GenerateOptions& options,
                                       const TokenCallback& on_tokens = {});

  // Totals since construction or reset_metrics() (generate() resets them first).
  const DecodeMetrics& metrics() const { return metrics_; }
  // The `draft_auto` scheduler: its measured costs and acceptance (null until a sequence used it).
  const VerifyScheduler* scheduler() const { return scheduler_.get(); }
  // The scheduler `draft_auto` sequences use (tests: one with given, frozen costs); by default one is
  // made on first use with the proposer's maximum and cost kind.
  void set_scheduler(std::unique_ptr<VerifyScheduler> scheduler) { scheduler_ = std::move(scheduler); }
  void reset_metrics() { metrics_ = DecodeMetrics{}; }

 private:
  struct Sequence;
  Sequence& get(SequenceId id) const;
  void check_options(const GenerateOptions& o) const;
  void check_tokens(std::span<const int32_t> tokens, int64_t first, const char* what) const;
  std::span<const uint64_t> allowed_after(Sequence& s, std::span<const int32_t> extra);
  static bool argmax_only(const Sequence& s);
  bool wants_draft_state(const GenerateOptions& o) const { return proposer_ && (o.draft_tokens > 0 || o.reusable); }
  int32_t choose(const float* logits, Sequence& s, std::span<const int32_t> extra);
  void target_distribution(const float* logits, Sequence& s, std::span<const int32_t> extra, std::vector<float>& p);
  int verify(Sequence& s, const Draft& draft, const float* rows, int32_t& next);
  void emit(Sequence& s, std::span<const int32_t> tokens, bool from_decode, std::vector<Event>& events);
  void record_logprobs(Sequence& s, const float* rows, size_t first);
  void finish(Sequence& s, FinishReason why);
  void draft(std::span<Sequence* const> running, std::vector<Draft>& drafts);
  bool starts_drafter_late(const Sequence& s, int64_t batch) const;
  int64_t unfinished() const;  // sequences not finished
  int judge(Sequence& s, const Draft& d, size_t request, int32_t& next);

  Transformer& target_;
  DraftProposer* proposer_;
  std::unique_ptr<VerifyScheduler> scheduler_;
  DecodeMetrics metrics_;
  std::map<SequenceId, std::unique_ptr<Sequence>> sequences_;
  SequenceId next_id_ = 0;
  int64_t prefill_chunk_ = kDefaultPrefillChunk;
  std::function<void(int64_t done, int64_t total)> prefill_progress_;
  Transformer::Output out_;
  std::vector<uint64_t> allowed_;
  std::vector<int32_t> context_;
  std::vector<float> probs_, residual_;  // reused: no allocation per token
};

}  // namespace dsv4

// Generation with speculative decoding (spec §4): per step the proposer drafts k tokens,
// the target verifies [last, d_1..d_k] in one pass, the longest acceptable prefix is kept
// plus one token of the target's own, and both states roll back to the accepted length.
//
// Greedy mode accepts a draft when it equals the target's argmax, so the output is
// token-identical to plain greedy decoding. Sampling mode uses speculative rejection
// sampling (accept d with probability min(1, p(d)/q(d)), else draw from max(0, p − q)),
// so every emitted token has the target's distribution. k = 0 is plain decoding.
// Several sequences decode together: one verify pass per step, ragged acceptance.
#pragma once
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "model/transformer.h"
#include "spec/decode_metrics.h"
#include "spec/proposer.h"

namespace dsv4 {

struct GenerateOptions {
  int64_t max_new_tokens = 64;
  int draft_tokens = 0;                  // k; 0 = no speculation
  SamplingParams sampling;
  std::optional<int32_t> eos;            // stop after emitting this token
  const TokenMask* mask = nullptr;
  bool record_first_draft_logits = false;  // keep each step's first-draft logits (tests)
};

struct SequenceOutput {
  std::vector<int32_t> tokens;           // generated tokens (EOS included when it stopped there)
  bool stopped_at_eos = false;
  // With record_first_draft_logits: per step, the position t of the first draft's MTP row and its logits.
  std::vector<std::pair<int64_t, std::vector<float>>> first_draft_logits;
};

class SpeculativeDecoder {
 public:
  // `proposer` may be null when draft_tokens is 0.
  SpeculativeDecoder(Transformer& target, DraftProposer* proposer);

  // Called with each sequence's newly emitted tokens as they are accepted (streaming).
  using TokenCallback = std::function<void(size_t sequence, std::span<const int32_t> tokens)>;

  std::vector<SequenceOutput> generate(std::span<const std::vector<int32_t>> prompts, const GenerateOptions& options,
                                       const TokenCallback& on_tokens = {});
  const DecodeMetrics& metrics() const { return metrics_; }

 private:
  struct Sequence;
  int32_t choose(const float* logits, Sequence& s, std::span<const int32_t> extra, const GenerateOptions& o);
  void target_distribution(const float* logits, Sequence& s, std::span<const int32_t> extra,
                           const GenerateOptions& o, std::vector<float>& p);
  // Verifies one sequence's drafts against its logits rows; returns accepted count and the next token.
  int verify(Sequence& s, const Draft& draft, const Transformer::Output& out, size_t request,
             const GenerateOptions& o, int32_t& next);
  void emit(Sequence& s, std::span<const int32_t> tokens, bool from_decode);
  void prefill(std::vector<Sequence>& seqs, std::span<const std::vector<int32_t>> prompts);
  std::vector<size_t> draft(std::vector<Sequence>& seqs, std::span<const size_t> active, std::vector<Draft>& drafts);
  void verify_step(std::vector<Sequence>& seqs, std::span<const size_t> active, const std::vector<Draft>& drafts,
                   std::span<const size_t> drafting);

  Transformer& target_;
  DraftProposer* proposer_;
  DecodeMetrics metrics_;
  const GenerateOptions* options_ = nullptr;     // of the running generate()
  const TokenCallback* on_tokens_ = nullptr;
  Transformer::Output out_;
  std::vector<uint8_t> allowed_;
  std::vector<int32_t> context_;
  std::vector<float> probs_, residual_;  // reused: no allocation per token
};

}  // namespace dsv4

// The joint distribution of sampled paths, for the tests that speculative sampling keeps the
// target's distribution: chi-square goodness of fit of sampled paths against the exact joint
// distribution of plain sampling (enumerated path by path with teacher forcing), and a proposer
// that reports the wrong q at depth >= 2 (the tests' power check).
#pragma once
#include <map>
#include <vector>

#include "support/spec_support.h"

namespace dsv4::test {

// Regularized upper incomplete gamma Q(a, x): the chi-square p-value Q(df / 2, chi2 / 2).
double gamma_q(double a, double x);

// Goodness of fit of observed counts to exact probabilities; cells expecting fewer than 5
// draws are pooled into one.
double goodness_of_fit_p_value(const std::map<std::vector<int32_t>, double>& p,
                               const std::map<std::vector<int32_t>, int64_t>& counts, int64_t n, int64_t* cells_used);

// The exact joint distribution of the first `depth` generated tokens under plain sampling.
std::map<std::vector<int32_t>, double> exact_joint(Engine& engine, const std::vector<int32_t>& prompt,
                                                   const SamplingParams& sp, int depth);

// Counts of the first four generated tokens of n sequences (the first from the prefill, the next
// three verified at draft depths 1, 2 and 3 of the first step when k = 3).
std::map<std::vector<int32_t>, int64_t> sample_paths(Engine& engine, DraftProposer* proposer,
                                                     const std::vector<int32_t>& prompt, const SamplingParams& sp,
                                                     int k, int64_t n, DecodeMetrics& m);

struct JointFit {
  double p = 0;       // chi-square p-value of the sampled paths against the exact joint
  int64_t cells = 0;  // cells of the test
  DecodeMetrics m;    // what the runs drafted and accepted
};

// n sequences sampled with k = 3 against the exact joint distribution of their first four tokens;
// prints what ran and the p-value under `label`.
JointFit fit_at_depth_three(Engine& engine, DraftProposer* proposer, const std::vector<int32_t>& prompt,
                            const SamplingParams& sp, const std::map<std::vector<int32_t>, double>& exact, int64_t n,
                            const char* label);

// A proposer that passes everything to another one (the tests' deliberately wrong proposers
// override propose()).
class ForwardingProposer : public DraftProposer {
 public:
  explicit ForwardingProposer(DraftProposer& inner) : inner_(inner) {}
  std::unique_ptr<ProposerState> new_state() override { return inner_.new_state(); }
  TargetFeatures features() const override { return inner_.features(); }
  int max_drafts() const override { return inner_.max_drafts(); }
  Cost draft_cost() const override { return inner_.draft_cost(); }
  int64_t prompt_features_from(int64_t prompt_length) const override { return inner_.prompt_features_from(prompt_length); }
  void prefill(std::span<const PrefillChunk> chunks, const Tensor& streams) override { inner_.prefill(chunks, streams); }
  void propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) override {
    inner_.propose(requests, drafts);
  }
  void accept(std::span<const Verified> verified, const Tensor& streams) override { inner_.accept(verified, streams); }

 protected:
  DraftProposer& inner_;
};

// A proposer that reports, for drafts 2..k, the distribution of draft 1 instead of the one each
// was drawn from: the rejection test at depth >= 2 then uses the wrong q.
class WrongDepthProbabilities final : public ForwardingProposer {
 public:
  using ForwardingProposer::ForwardingProposer;
  void propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) override {
    inner_.propose(requests, drafts);
    for (Draft& d : drafts)
      for (size_t j = 1; j < d.probs.size(); ++j) d.probs[j] = d.probs[0];
  }
};

// A proposer that reports each draft's distribution without the request's top-k / top-p cut
// (softmax of its logits at the temperature over the whole vocabulary): q(d) too small where the
// cut concentrates the mass, so drafts are accepted too often.
class UncutProbabilities final : public ForwardingProposer {
 public:
  using ForwardingProposer::ForwardingProposer;
  void propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) override;
};

}  // namespace dsv4::test

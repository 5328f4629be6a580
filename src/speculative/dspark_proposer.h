// The DSpark drafter (model/dspark.h) as a draft proposer (dspark.md, "The loop").
//
// A sequence's state is its rings: one row per verified position, written from the target's taps
// of the pass that verified it — a prompt's from its prefill (only its last `sliding_window`
// positions: no draft reads older ones), then after each verification the positions it accepted
// (the last token and the accepted drafts; a rejected draft's row is never written, so there is
// nothing to roll back). propose() runs one block pass for every requested sequence together,
// then picks the drafts row by row — row k's Markov bias depends on draft k, so each row's bias
// is computed for all sequences at once — and reports each draft's survival: sigmoid of the
// confidence head's logit.
//
// The block has B rows and is not causal, so a shorter draft is not a block of fewer rows: the
// full block runs, and only the first K rows go through the LM head.
#pragma once
#include "model/dspark.h"
#include "speculative/draft_choice.h"
#include "speculative/proposer.h"

namespace dsv4 {

class DSparkProposer final : public DraftProposer {
 public:
  explicit DSparkProposer(DSparkDrafter& drafter);

  std::unique_ptr<ProposerState> new_state() override;
  TargetFeatures features() const override { return TargetFeatures::Taps; }
  int max_drafts() const override { return int(drafter_.block_size()); }
  Cost draft_cost() const override { return Cost::Once; }
  int64_t prompt_features_from(int64_t prompt_length) const override;
  int64_t window() const override;
  std::unique_ptr<ProposerState> state_at(int64_t length) override;
  void prefill(std::span<const PrefillChunk> chunks, const Tensor& taps) override;
  void propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) override;
  void accept(std::span<const Verified> verified, const Tensor& taps) override;
  void keep_all_rows(ProposerState& state, bool keep = true) override;
  int64_t bytes_held() const override;
  bool save(const ProposerState& state, StateWriter& w) const override;
  std::unique_ptr<ProposerState> load(StateReader& r) override;
  std::unique_ptr<ProposerState> fork(const ProposerState& from, int64_t length) override;

  const DSparkDrafter& drafter() const { return drafter_; }
  // A state's rings (tools: the bench drafts on them directly).
  static SequenceCache& rings(ProposerState& state);

 private:
  struct State;
  DSparkDrafter& drafter_;
  DSparkDrafter::Output out_;
  DraftChooser chooser_;
  std::vector<float> bias_, row_, confidence_;
};

}  // namespace dsv4

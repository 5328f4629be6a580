// The MTP module as a draft proposer (spec §4).
//
// Its cache holds one row per position, computed from the *target's* streams: over the
// prompt (prefill) and, after each verification, for the newly verified positions
// ("draft extend"). Chained drafts (2..k) run on the MTP's own output streams and write
// provisional rows that accept() discards. The rows to recompute are queued and run in
// the same MTP pass as the next first draft, so a step costs k MTP passes, not k + 1 —
// except for a prompt's rows beyond a few, computed with the prompt (no head: only the
// cache): riding along, a prompt of a few hundred tokens made the first decoding step cost
// a prefill of the MTP layer (measured: 1 s instead of 0.15 s for 160 tokens of V4-Flash
// dimensions), which is prompt work and belongs to the prefill.
//
// The MTP layer attends to a window of W rows, so the first draft after a prompt of P tokens
// reads rows P − W .. P − 1 and no later one reads an earlier row: a prompt's rows before its
// last window are never computed (nor their streams by the target's last block; the cache's
// length moves past them). A prompt of 4096 tokens costs the MTP 128 rows, not 4096. A sequence
// that may not draft soon (`--draft auto`) leaves even those until its first draft, and its
// queue never holds more than a window: plain decoding costs the MTP nothing but the streams kept.
//
// The streams it has been given and not yet used live in a paged table of backend memory
// per sequence (row p: the stream fed to the MTP row at position p), so on a device
// backend the target's streams go from its output to the MTP's input without the host.
#pragma once
#include "core/workspace.h"
#include "model/mtp.h"
#include "speculative/draft_choice.h"
#include "speculative/proposer.h"

namespace dsv4 {

class MtpProposer final : public DraftProposer {
 public:
  explicit MtpProposer(MtpModule& mtp);

  std::unique_ptr<ProposerState> new_state() override;
  int64_t prompt_features_from(int64_t prompt_length) const override;
  int64_t window() const override;
  int64_t queued_rows(const ProposerState& state, int64_t position) const override;
  void prefill(std::span<const PrefillChunk> chunks, const Tensor& streams) override;
  // Tests: every prompt row through the MTP as well (drafts must not change).
  void compute_whole_prompts(bool whole) { whole_prompts_ = whole; }
  int64_t skipped_rows() const { return skipped_rows_; }  // rows never computed (before a window), so far

  // A prompt's queued rows beyond this many are computed at once, in its prefill, without a
  // head (what a step verifies, at most max_rollback rows, always rides along).
  static constexpr int64_t kMaxQueuedRows = 16;
  void propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) override;
  void accept(std::span<const Verified> verified, const Tensor& streams) override;
  void keep_all_rows(ProposerState& state, bool keep = true) override;
  int64_t bytes_held() const override;
  bool save(const ProposerState& state, StateWriter& w) const override;
  std::unique_ptr<ProposerState> load(StateReader& r) override;
  std::unique_ptr<ProposerState> fork(const ProposerState& from, int64_t length) override;
  std::unique_ptr<ProposerState> state_at(int64_t length) override;

 private:
  struct State;
  // One store of the pass's rows: rows[i] of *tables[i] = streams row i (null: not kept).
  void store(std::vector<RowTable*>& tables, std::vector<int64_t>& rows, const Tensor& streams);

  MtpModule& mtp_;
  int64_t width_;
  RowPool stream_pool_;   // the states' queued streams (f32 rows of hc·D)
  Workspace scratch_;     // chained streams gathered for one store
  MtpModule::Output out_;
  DraftChooser chooser_;
  bool whole_prompts_ = false;
  int64_t skipped_rows_ = 0;
};

}  // namespace dsv4

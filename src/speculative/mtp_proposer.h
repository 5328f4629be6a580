// The MTP module as a draft proposer (spec §4).
//
// Its cache holds one row per position, computed from the *target's* streams: over the
// prompt (prefill) and, after each verification, for the newly verified positions
// ("draft extend"). Chained drafts (2..k) run on the MTP's own output streams and write
// provisional rows that accept() discards. The rows to recompute are queued and run in
// the same MTP pass as the next first draft, so a step costs k MTP passes, not k + 1 —
// except for a long prompt, whose rows are computed as they come (no head: only the cache).
#pragma once
#include "model/mtp.h"
#include "speculative/proposer.h"

namespace dsv4 {

class MtpProposer final : public DraftProposer {
 public:
  explicit MtpProposer(MtpModule& mtp);

  std::unique_ptr<ProposerState> new_state() override;
  void prefill(ProposerState& state, std::span<const int32_t> prompt, int64_t first, int64_t n,
               const float* target_streams) override;

  // Queued rows beyond this many are computed at once (a long prompt's), without a head.
  static constexpr int64_t kMaxQueuedRows = 256;
  void propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) override;
  void accept(ProposerState& state, int accepted, const float* target_streams,
              std::span<const int32_t> tokens) override;

 private:
  struct State;
  // Chooses the next draft token of request i from the MTP logits; false when the mask leaves none.
  bool choose(const float* logits, const DraftRequest& req, const Draft& draft, int32_t& token,
              std::vector<float>* probs);

  MtpModule& mtp_;
  int64_t width_;
  MtpModule::Output out_;
  std::vector<uint8_t> allowed_;
  std::vector<int32_t> context_;
  std::vector<float> probs_;
};

}  // namespace dsv4

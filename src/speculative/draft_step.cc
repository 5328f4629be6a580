// The decoder's draft step: how many drafts each running sequence gets (fixed, or the verify
// scheduler's choice), the proposer's call, and the choice of where an auto sequence's drafter
// starts.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "speculative/decoder_sequence.h"

namespace dsv4 {

// Drafts for the running sequences: at most what can still be emitted after the target's
// own token, and what fits in the context; with draft_auto, as many as the scheduler finds worth
// verifying (it plans before drafting and trims the drafts by their survival after).
void SpeculativeDecoder::draft(std::span<Sequence* const> running, std::vector<Draft>& drafts) {
  const int64_t max_positions = target_.config().max_position_embeddings;
  std::vector<int> count(running.size(), 0);
  std::vector<size_t> automatic;
  for (size_t r = 0; r < running.size(); ++r) {
    Sequence& s = *running[r];
    const GenerateOptions& o = s.options;
    const int64_t remaining = o.max_new_tokens - int64_t(s.out.tokens.size());
    const int64_t room = max_positions - s.cache->length() - 1;
    count[r] = s.draft_state && s.cache->length() >= s.draft_from
                   ? int(std::max<int64_t>(0, std::min<int64_t>({o.draft_tokens, remaining - 1, room})))
                   : 0;
    if (o.draft_auto && count[r] > 0) automatic.push_back(r);
  }
  std::vector<const AcceptanceHistory*> histories;
  if (!automatic.empty()) {
    std::vector<int> limits;
    for (size_t r : automatic) {
      histories.push_back(&running[r]->acceptance);
      limits.push_back(count[r]);
    }
    const std::vector<int> planned = scheduler_->plan(histories, limits);
    for (size_t j = 0; j < automatic.size(); ++j) count[automatic[j]] = planned[j];
  }
  std::vector<DraftRequest> requests;
  std::vector<size_t> index;
  drafts.assign(running.size(), Draft{});
  int depth = 0;
  for (size_t r = 0; r < running.size(); ++r) {
    if (count[r] <= 0) continue;
    Sequence& s = *running[r];
    const GenerateOptions& o = s.options;
    requests.push_back({s.draft_state.get(), s.cache->length() - 1, count[r], s.context, &o.sampling, o.mask,
                        s.mask_sequence, &s.rng, o.record_steps});
    index.push_back(r);
    depth = std::max(depth, count[r]);
  }
  // A proposer that keeps its own cache from the target's rows (the MTP) computes the rows of the
  // plain steps since it last drafted (an auto sequence's first draft: its prompt's last window)
  // in its next draft's pass: that time is the plain steps' share, not a draft's, and charged to
  // drafting it made a probe or the calibration look dear enough that drafting never resumed.
  // Drafts are timed only where no sequence has more rows queued than a steady draft carries (the
  // rows its last verification accepted, and one per plain step since: at most its draft limit
  // and one more). Until then a draft counts as free, so the next step drafts and is timed: timing
  // only drafts whose sequences drafted the step before too made the calibration's draft, one
  // plain step after the prompt, untimed, and the extra step it took was a sixth of what drafting
  // cost a 160-token run on random weights.
  if (requests.empty()) return;
  int64_t queued = 0;
  bool steady = true;
  for (size_t j = 0; j < requests.size(); ++j) {
    const int64_t rows = proposer_->queued_rows(*requests[j].state, requests[j].position);
    queued += rows;
    steady = steady && rows <= int64_t(running[index[j]]->options.draft_tokens) + 1;
  }
  std::vector<Draft> got;
  const auto t0 = std::chrono::steady_clock::now();
  proposer_->propose(requests, got);
  const int64_t drafting = int64_t(requests.size());
  if (scheduler_ && (steady || queued == 0)) scheduler_->record_draft(drafting, depth, seconds_since(t0));
  else if (scheduler_ && queued > 0) scheduler_->record_catch_up(queued, drafting, depth, seconds_since(t0));
  for (size_t j = 0; j < index.size(); ++j) drafts[index[j]] = std::move(got[j]);
  if (automatic.empty()) return;
  std::vector<const Draft*> made;
  for (size_t r : automatic) made.push_back(&drafts[r]);
  const std::vector<int> verify = scheduler_->select(histories, made);
  for (size_t j = 0; j < automatic.size(); ++j) drafts[automatic[j]].truncate(size_t(verify[j]));
}

// An auto sequence's drafter reads, at its first draft, the last window of W rows of the prompt,
// whose streams the target's last block computes in full for it (W - 1 rows more than the logits
// need: one layer's share of a prompt row each). Started at the prompt's last row instead, the
// drafter holds a whole window of its own after W - 1 plain steps and drafts exactly from there:
// the sequence gives up drafting for its first W - 1 tokens. Late where those tokens' expected
// saving (the process's acceptance and costs, at the batch it joins: `batch`, or the recent typical
// one where that is larger — a request that arrives first is soon joined) is less than the window's
// cost — a short reply, a batch where drafting barely pays, a shallow model whose last block is a
// large share of a row; early (the window computed) until the costs are measured.
bool SpeculativeDecoder::starts_drafter_late(const Sequence& s, int64_t batch) const {
  const GenerateOptions& o = s.options;
  if (!o.draft_auto || !proposer_ || proposer_->window() <= 0 || !scheduler_ || scheduler_->calibrating()) return false;
  const int64_t W = proposer_->window(), P = int64_t(s.prompt.size());
  const double row = scheduler_->prompt_row_seconds(std::min(P, prefill_chunk_));
  if (!(row > 0)) return false;
  const double window_cost = double(std::min(P, W) - 1) * row / double(target_.config().num_hidden_layers);
  const int64_t sharing = std::max<int64_t>({batch, std::llround(scheduler_->typical_batch()), 1});
  const int64_t tokens = std::min(W, o.max_new_tokens) - 1;
  return double(tokens) * scheduler_->seconds_saved_per_token(sharing) < window_cost;
}

int64_t SpeculativeDecoder::unfinished() const {
  return std::count_if(sequences_.begin(), sequences_.end(), [](const auto& kv) { return !kv.second->done; });
}

}  // namespace dsv4

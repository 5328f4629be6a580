#include "speculative/mtp_proposer.h"

#include <algorithm>

#include "core/error.h"

namespace dsv4 {

struct MtpProposer::State final : ProposerState {
  std::unique_ptr<SequenceCache> cache;
  std::vector<float> pending_streams;   // rows to compute before the next draft, [n, hc·D]
  std::vector<int32_t> pending_tokens;
  int64_t first_draft_position = -1;    // row of the last first draft (target-conditioned, kept)
};

MtpProposer::MtpProposer(MtpModule& mtp) : mtp_(mtp), width_(mtp.hidden_width()) {}

std::unique_ptr<ProposerState> MtpProposer::new_state() {
  auto s = std::make_unique<State>();
  s->cache = mtp_.new_sequence();
  return s;
}

void MtpProposer::prefill(ProposerState& state, std::span<const int32_t> prompt, int64_t first, int64_t n,
                          const float* target_streams) {
  State& s = static_cast<State&>(state);
  DSV4_CHECK(s.first_draft_position < 0 && s.cache->length() + int64_t(s.pending_tokens.size()) == first,
             "mtp proposer: prefill of positions from ", first, " on a state holding ",
             s.cache->length() + int64_t(s.pending_tokens.size()));
  // Row t pairs the target's streams at t with token t+1: rows first .. min(first + n, P - 1) - 1.
  const int64_t end = std::min<int64_t>(first + n, int64_t(prompt.size()) - 1);
  if (end <= first) return;
  s.pending_streams.insert(s.pending_streams.end(), target_streams, target_streams + (end - first) * width_);
  s.pending_tokens.insert(s.pending_tokens.end(), prompt.begin() + first + 1, prompt.begin() + end + 1);
  if (int64_t(s.pending_tokens.size()) <= kMaxQueuedRows) return;  // small: it rides along with the first draft
  MtpModule::Request r{s.cache.get(), s.pending_streams.data(), s.pending_tokens, false, /*no_logits=*/true};
  mtp_.forward(std::span(&r, 1), out_);
  s.pending_streams.clear();
  s.pending_tokens.clear();
}

void MtpProposer::accept(ProposerState& state, int accepted, const float* target_streams,
                         std::span<const int32_t> tokens) {
  State& s = static_cast<State&>(state);
  DSV4_CHECK(s.first_draft_position >= 0, "mtp proposer: accept without a proposal");
  DSV4_CHECK(int64_t(tokens.size()) == accepted, "mtp proposer: ", accepted, " accepted but ", tokens.size(),
             " tokens given");
  s.cache->truncate(s.first_draft_position + 1);  // drop the provisional rows of chained drafts
  s.pending_streams.assign(target_streams, target_streams + size_t(accepted) * size_t(width_));
  s.pending_tokens.assign(tokens.begin(), tokens.end());
  s.first_draft_position = -1;
}

bool MtpProposer::choose(const float* logits, const DraftRequest& req, const Draft& draft, int32_t& token,
                         std::vector<float>* probs) {
  const int64_t vd = mtp_.vocab();
  const SamplingParams greedy;
  const SamplingParams& sampling = req.sampling ? *req.sampling : greedy;
  const TokenMask* mask = req.mask;
  std::span<const uint8_t> allowed;
  if (mask) {
    const int64_t V = mtp_.target_vocab();
    allowed_.assign(size_t(V), 0);
    context_.assign(req.context.begin(), req.context.end());
    context_.insert(context_.end(), draft.tokens.begin(), draft.tokens.end());
    mask->allowed_tokens(req.mask_sequence, context_, allowed_);
    if (std::none_of(allowed_.begin(), allowed_.begin() + vd, [](uint8_t a) { return a != 0; })) return false;
    allowed = std::span<const uint8_t>(allowed_.data(), size_t(vd));
  }
  std::span<const float> l(logits, size_t(vd));
  if (sampling.greedy()) {
    token = argmax_token(l, allowed);
    return true;
  }
  sampling_distribution(l, sampling, allowed, probs_);
  DSV4_CHECK(req.rng, "mtp proposer: sampling without a random generator");
  token = sample_from(probs_, *req.rng);
  if (probs) {
    probs->assign(size_t(mtp_.target_vocab()), 0.0f);  // q over the full vocabulary (0 beyond the draft's)
    std::copy(probs_.begin(), probs_.end(), probs->begin());
  }
  return true;
}

void MtpProposer::propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) {
  drafts.assign(requests.size(), Draft{});
  // Draft 1: queued target-conditioned rows + the row of (X_{L-1}, x_L), in one pass.
  std::vector<std::vector<float>> streams(requests.size());
  std::vector<std::vector<int32_t>> tokens(requests.size());
  std::vector<MtpModule::Request> batch;
  std::vector<size_t> index;  // request of each batch entry
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    if (r.num_drafts <= 0) continue;
    State& s = static_cast<State&>(*r.state);
    DSV4_CHECK(s.cache->length() + int64_t(s.pending_tokens.size()) == r.position, "mtp proposer: state holds ",
               s.cache->length() + int64_t(s.pending_tokens.size()), " positions, draft requested at ", r.position);
    streams[i] = std::move(s.pending_streams);
    streams[i].insert(streams[i].end(), r.target_stream, r.target_stream + width_);
    tokens[i] = std::move(s.pending_tokens);
    tokens[i].push_back(r.last_token);
    s.pending_streams.clear();
    s.pending_tokens.clear();
    s.first_draft_position = r.position;
    batch.push_back({s.cache.get(), streams[i].data(), tokens[i], false});
    index.push_back(i);
  }
  while (!batch.empty()) {
    mtp_.forward(batch, out_);
    std::vector<MtpModule::Request> next;
    std::vector<size_t> next_index;
    for (size_t b = 0; b < batch.size(); ++b) {
      const size_t i = index[b];
      const DraftRequest& r = requests[i];
      Draft& d = drafts[i];
      const float* logits = out_.logits_row(b);
      const bool greedy = !r.sampling || r.sampling->greedy();
      int32_t token;
      std::vector<float> probs;
      if (!choose(logits, r, d, token, greedy ? nullptr : &probs))
        continue;  // the mask allows nothing the draft head can say: stop drafting here
      d.tokens.push_back(token);
      if (r.record_logits) d.logits.emplace_back(logits, logits + mtp_.vocab());
      if (!greedy) d.probs.push_back(std::move(probs));
      if (int(d.tokens.size()) < r.num_drafts) {  // chain: the MTP's own output streams + this draft
        const int64_t last = int64_t(batch[b].tokens.size()) - 1;
        const float* s = out_.streams_row(b, last);
        streams[i].assign(s, s + width_);
        tokens[i].assign(1, token);
        next.push_back({batch[b].sequence, streams[i].data(), tokens[i], false});
        next_index.push_back(i);
      }
    }
    batch = std::move(next);
    index = std::move(next_index);
  }
}

}  // namespace dsv4

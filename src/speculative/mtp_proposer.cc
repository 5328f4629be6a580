#include "speculative/mtp_proposer.h"

#include <algorithm>

#include "core/error.h"

namespace dsv4 {

struct MtpProposer::State final : ProposerState {
  std::unique_ptr<SequenceCache> cache;  // MTP rows [0, cache->length())
  RowTable streams;                      // the streams of rows [cache->length(), streams_end) (+ chained drafts')
  int64_t streams_end = 0;
  int64_t first_draft_position = -1;     // row of the last first draft (target-conditioned, kept)
  int64_t bytes_held() const override { return cache->bytes_held() + streams.bytes_held(); }
};

MtpProposer::MtpProposer(MtpModule& mtp)
    : mtp_(mtp), width_(mtp.hidden_width()), stream_pool_(mtp.backend(), DType::F32, width_, 16),
      scratch_(mtp.backend()), chooser_(mtp.target_vocab()) {}

std::unique_ptr<ProposerState> MtpProposer::new_state() {
  auto s = std::make_unique<State>();
  s->cache = mtp_.new_sequence();
  s->streams = RowTable(&stream_pool_);
  return s;
}

int64_t MtpProposer::bytes_held() const {
  return mtp_.pools().bytes_held() + stream_pool_.blocks_in_use() * int64_t(stream_pool_.block_bytes());
}

void MtpProposer::keep_all_rows(ProposerState& state, bool keep) { static_cast<State&>(state).cache->keep_all_rows(keep); }

// The MTP's rows [0, m) and the streams of [m, length) queued: rows up to `length` - 1 read tokens up
// to `length`, which the new sequence shares, so rows the source computed past the cut serve too.
// The window before the cut must be there (a prompt computes only its last window's rows, so a cut
// deep inside a long prompt has none: null, and the new sequence prefills from the start).
std::unique_ptr<ProposerState> MtpProposer::fork(const ProposerState& from, int64_t length) {
  const State& s = static_cast<const State&>(from);
  if (s.first_draft_position >= 0 || length < 0 || length > s.streams_end) return nullptr;
  const int64_t m = std::min(length, s.cache->length());
  if (m < s.cache->min_truncate_length()) return nullptr;
  for (int64_t p = std::max<int64_t>(0, length - mtp_.window()); p < m; ++p)
    if (!s.cache->layer(0).kv.has_row(p)) return nullptr;
  for (int64_t p = m; p < length; ++p)
    if (!s.streams.has_row(p)) return nullptr;
  auto f = std::make_unique<State>();
  f->cache = s.cache->fork(m);
  f->streams = s.streams.fork(length);
  f->streams_end = length;
  return f;
}

std::unique_ptr<ProposerState> MtpProposer::state_at(int64_t length) {
  auto s = std::unique_ptr<State>(static_cast<State*>(new_state().release()));
  s->cache->skip_to(length);
  s->streams.skip_to(length);
  s->streams_end = length;
  return s;
}

bool MtpProposer::save(const ProposerState& state, StateWriter& w) const {
  const State& s = static_cast<const State&>(state);
  DSV4_CHECK(s.first_draft_position < 0, "mtp proposer: a state saved with a draft in flight");
  write_cache(w, *s.cache);
  write_table(w, s.streams);
  w.put<int64_t>(s.streams_end);
  return true;
}

std::unique_ptr<ProposerState> MtpProposer::load(StateReader& r) {
  auto s = std::unique_ptr<State>(static_cast<State*>(new_state().release()));
  read_cache(r, *s->cache);
  read_table(r, s->streams);
  s->streams_end = r.get<int64_t>();
  DSV4_CHECK(s->streams_end >= s->cache->length() && s->streams_end <= s->streams.size(), r.path().string(),
             ": an MTP state whose streams end at ", s->streams_end, " with ", s->cache->length(), " rows");
  return s;
}

void MtpProposer::store(std::vector<RowTable*>& tables, std::vector<int64_t>& rows, const Tensor& streams) {
  const int64_t n = streams.numel() / width_;
  DSV4_CHECK(int64_t(tables.size()) == n, "mtp proposer: ", tables.size(), " rows for streams ", streams.shape_string());
  mtp_.backend().store_rows(tables, rows, streams.reshape({n, width_}));
}

int64_t MtpProposer::prompt_features_from(int64_t prompt_length) const {
  return whole_prompts_ ? 0 : std::max<int64_t>(0, prompt_length - mtp_.window());
}

int64_t MtpProposer::window() const { return mtp_.window(); }

int64_t MtpProposer::queued_rows(const ProposerState& state, int64_t position) const {
  // A draft at `position` computes rows [cache length, position]: the last is its own.
  return std::max<int64_t>(0, position - static_cast<const State&>(state).cache->length());
}

void MtpProposer::prefill(std::span<const PrefillChunk> chunks, const Tensor& streams) {
  const size_t rows_in_pass = size_t(streams.numel() / width_);
  std::vector<RowTable*> tables(rows_in_pass, nullptr);
  std::vector<int64_t> at(rows_in_pass, 0);
  std::vector<MtpModule::Request> now;  // sequences with more rows queued than ride along
  std::vector<State*> now_states;
  for (const PrefillChunk& c : chunks) {
    State& s = static_cast<State&>(*c.state);
    DSV4_CHECK(s.first_draft_position < 0 && s.streams_end == c.first, "mtp proposer: prefill of positions from ",
               c.first, " on a state holding ", s.streams_end);
    const int64_t end = c.first + c.n;
    DSV4_CHECK(c.from >= c.first && c.from <= end && c.row >= 0 && size_t(c.row + end - c.from) <= rows_in_pass &&
                   end <= int64_t(c.prompt.size()),
               "mtp proposer: prefill of positions [", c.first, ", ", end, ") with features from ", c.from, " at row ",
               c.row, " of ", rows_in_pass, " with ", c.prompt.size(), " tokens");
    if (c.from > c.first) {  // rows before the prompt's last window: never read (nor queued ones before them)
      DSV4_CHECK(c.from <= int64_t(c.prompt.size()) - mtp_.window(), "mtp proposer: no features for positions [",
                 c.first, ", ", c.from, "), which the first draft's window reads");
      skipped_rows_ += c.from - s.cache->length();
      s.cache->skip_to(c.from);
      s.streams.skip_to(c.from);
    }
    s.streams.ensure_rows(end);
    for (int64_t p = c.from; p < end; ++p) {
      tables[size_t(c.row + p - c.from)] = &s.streams;
      at[size_t(c.row + p - c.from)] = p;
    }
    s.streams_end = end;
    // Row t pairs the streams at t with token t+1: rows up to P - 2 can be computed.
    const int64_t begin = s.cache->length(), computable = std::min<int64_t>(end, int64_t(c.prompt.size()) - 1);
    if (computable - begin > kMaxQueuedRows && !c.defer) {
      now.push_back({s.cache.get(), nullptr, c.prompt.subspan(size_t(begin + 1), size_t(computable - begin)), false,
                     /*no_logits=*/true, &s.streams});
      now_states.push_back(&s);
    }
  }
  store(tables, at, streams);
  if (now.empty()) return;  // the few queued rows ride along with the first draft
  mtp_.forward(now, out_);
  for (State* s : now_states) s->streams.release_before(s->cache->length());
}

void MtpProposer::accept(std::span<const Verified> verified, const Tensor& streams) {
  const size_t rows_in_pass = size_t(streams.numel() / width_);
  std::vector<RowTable*> tables(rows_in_pass, nullptr);
  std::vector<int64_t> at(rows_in_pass, 0);
  for (const Verified& v : verified) {
    State& s = static_cast<State&>(*v.state);
    int64_t L = s.streams_end;  // no proposal in this step: the verification was [x_L] alone
    if (s.first_draft_position >= 0) {
      L = s.first_draft_position + 1;
      s.cache->truncate(L);  // drop the provisional rows of chained drafts
      s.streams.truncate(L);
    }
    DSV4_CHECK(v.accepted >= 0 && (s.first_draft_position >= 0 || v.accepted == 0) && v.row >= 0 &&
                   size_t(v.row + v.accepted) < rows_in_pass,
               "mtp proposer: ", v.accepted, " accepted at row ", v.row, " of ", rows_in_pass);
    s.streams.ensure_rows(L + v.accepted + 1);
    for (int i = 0; i <= v.accepted; ++i) {
      tables[size_t(v.row + i)] = &s.streams;
      at[size_t(v.row + i)] = L + i;
    }
    s.streams_end = L + v.accepted + 1;
    // Queued rows older than the next draft's window are never read (plain steps of an auto
    // sequence queue one a step): the cache moves past them.
    if (const int64_t oldest = s.streams_end - mtp_.window(); oldest > s.cache->length()) {
      skipped_rows_ += oldest - s.cache->length();
      s.cache->skip_to(oldest);
    }
    s.streams.release_before(s.cache->length());
    s.first_draft_position = -1;
  }
  store(tables, at, streams);
}

void MtpProposer::propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) {
  drafts.assign(requests.size(), Draft{});
  // Draft 1: the queued target-conditioned rows + the row of (X_{L-1}, x_L), in one pass.
  std::vector<int32_t> chained(requests.size());  // the token each chained row is fed
  std::vector<MtpModule::Request> batch;
  std::vector<size_t> index;  // request of each batch entry
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    if (r.num_drafts <= 0) continue;
    State& s = static_cast<State&>(*r.state);
    const int64_t begin = s.cache->length();
    DSV4_CHECK(s.first_draft_position < 0 && s.streams_end == r.position + 1 &&
                   int64_t(r.context.size()) == r.position + 2,
               "mtp proposer: state holds streams up to ", s.streams_end, ", draft requested at ", r.position,
               " with ", r.context.size(), " tokens of context");
    s.first_draft_position = r.position;
    batch.push_back({s.cache.get(), nullptr, r.context.subspan(size_t(begin + 1)), false, false, &s.streams});
    index.push_back(i);
  }
  while (!batch.empty()) {
    mtp_.forward(batch, out_);
    std::vector<MtpModule::Request> next;
    std::vector<size_t> next_index;
    std::vector<RowTable*> tables;   // where each chained row's input stream goes
    std::vector<int64_t> at, rows;   // its position there, its row in out_.streams
    for (size_t b = 0; b < batch.size(); ++b) {
      const size_t i = index[b];
      const DraftRequest& r = requests[i];
      Draft& d = drafts[i];
      const float* logits = out_.logits_row(b);
      const bool greedy = !r.sampling || r.sampling->greedy();
      int32_t token;
      std::vector<float> probs;
      if (!chooser_.choose(std::span<const float>(logits, size_t(mtp_.vocab())), r, d.tokens, token,
                           greedy ? nullptr : &probs))
        continue;  // the mask allows nothing the draft head can say: stop drafting here
      d.tokens.push_back(token);
      if (r.record_logits) d.logits.emplace_back(logits, logits + mtp_.vocab());
      if (!greedy) d.probs.push_back(std::move(probs));
      if (int(d.tokens.size()) < r.num_drafts) {  // chain: the MTP's own output streams + this draft
        State& s = static_cast<State&>(*r.state);
        const int64_t position = s.cache->length();  // the chained row's
        s.streams.ensure_rows(position + 1);
        tables.push_back(&s.streams);
        at.push_back(position);
        rows.push_back(out_.logits_begin[b]);  // (its last row: the only one with logits)
        chained[i] = token;
        next.push_back({batch[b].sequence, nullptr, std::span<const int32_t>(&chained[i], 1), false, false, &s.streams});
        next_index.push_back(i);
      }
    }
    if (!tables.empty()) {  // one gather and one store for every chained sequence
      scratch_.reset();
      Tensor picked = scratch_.alloc_f32({int64_t(rows.size()), width_});
      mtp_.backend().gather_rows(out_.streams.reshape({out_.streams.dim(0), width_}), rows, picked);
      mtp_.backend().store_rows(tables, at, picked);
    }
    batch = std::move(next);
    index = std::move(next_index);
  }
}

}  // namespace dsv4

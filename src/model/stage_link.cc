#include "model/stage_link.h"

#include "core/error.h"

namespace dsv4 {

namespace {
constexpr int64_t kMagic = 0x44535634;  // "DSV4"
constexpr int64_t AllLogits = 1, NoLogits = 2, Prompt = 4, Streams = 8;  // a request's flags
}  // namespace

std::vector<int64_t> encode_stage_header(const StageHeader& h) {
  std::vector<int64_t> w{kMagic, int64_t(h.kind), h.pass, h.micro_batch};
  std::vector<int64_t> ops;
  CacheJournal::encode(h.ops, ops);
  w.push_back(int64_t(ops.size()));
  w.insert(w.end(), ops.begin(), ops.end());
  w.push_back(int64_t(h.requests.size()));
  for (const StageRequest& r : h.requests) {
    w.push_back(r.sequence);
    w.push_back(int64_t(r.tokens.size()));
    w.push_back((r.all_logits ? AllLogits : 0) | (r.no_logits ? NoLogits : 0) | (r.prompt ? Prompt : 0) |
                (r.streams ? Streams : 0));
    w.push_back(r.streams_from);
    for (int32_t t : r.tokens) w.push_back(t);
  }
  w.push_back(int64_t(h.stats.size()));
  w.insert(w.end(), h.stats.begin(), h.stats.end());
  return w;
}

StageHeader decode_stage_header(std::span<const int64_t> w) {
  size_t at = 0;
  auto next = [&](const char* what) {
    DSV4_CHECK(at < w.size(), "pipeline stage message: cut short before its ", what, " (", w.size(), " words)");
    return w[at++];
  };
  auto count = [&](const char* what) {
    const int64_t n = next(what);
    DSV4_CHECK(n >= 0 && size_t(n) <= w.size() - at, "pipeline stage message: ", what, " ", n, " with ",
               w.size() - at, " words left");
    return size_t(n);
  };
  DSV4_CHECK(next("magic") == kMagic, "pipeline stage message: not a dsv4 stage message (a different program or "
             "version on another rank?)");
  StageHeader h;
  const int64_t kind = next("kind");
  DSV4_CHECK(kind == StageHeader::Pass || kind == StageHeader::Stop, "pipeline stage message: unknown kind ", kind);
  h.kind = StageHeader::Kind(kind);
  h.pass = next("pass");
  h.micro_batch = next("micro-batch");
  const size_t op_words = count("cache operations");
  h.ops = CacheJournal::decode(w.subspan(at, op_words));
  at += op_words;
  const size_t requests = count("requests");
  for (size_t i = 0; i < requests; ++i) {
    StageRequest r;
    r.sequence = next("sequence");
    const size_t tokens = count("tokens");
    const int64_t flags = next("flags");
    r.all_logits = flags & AllLogits;
    r.no_logits = flags & NoLogits;
    r.prompt = flags & Prompt;
    r.streams = flags & Streams;
    r.streams_from = next("streams_from");
    for (size_t t = 0; t < tokens; ++t) r.tokens.push_back(int32_t(w[at++]));
    h.requests.push_back(std::move(r));
  }
  const size_t stats = count("stats");
  h.stats.assign(w.begin() + long(at), w.begin() + long(at + stats));
  at += stats;
  DSV4_CHECK(at == w.size(), "pipeline stage message: ", w.size() - at, " words after its end");
  return h;
}

void StageStats::append_to(std::vector<int64_t>& w) const {
  auto micros = [](double s) { return int64_t(s * 1e6); };
  w.insert(w.end(), {passes, rows, micros(compute_seconds), micros(wait_seconds), micros(send_seconds), bytes_sent,
                     messages_sent, split_passes});
}

StageStats StageStats::read(std::span<const int64_t> w) {
  DSV4_CHECK(w.size() >= kWords, "pipeline stage statistics: ", w.size(), " words");
  StageStats s;
  s.passes = w[0];
  s.rows = w[1];
  s.compute_seconds = double(w[2]) * 1e-6;
  s.wait_seconds = double(w[3]) * 1e-6;
  s.send_seconds = double(w[4]) * 1e-6;
  s.bytes_sent = w[5];
  s.messages_sent = w[6];
  s.split_passes = w[7];
  return s;
}

}  // namespace dsv4

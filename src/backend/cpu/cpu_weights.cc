// Weights in the CPU backend's own memory (BackendOptions::weights_in_memory).
//
// Read in place from the mapped checkpoint, the weights sit on the page cache's pages, mostly
// 4 KiB: a decode step routing to experts it has not read lately walks the page tables for each
// of their pages (a V4-Flash FP4 expert is ~1,100 of them), and the hardware prefetchers stop
// at every page boundary. Copied once into one buffer on 2 MiB pages, the routed experts of a
// decode step ran 2.2–2.8× faster (2-core Zen 4: 11.3–12.6 → 4.1–5.1 ms per layer and token).
// The price: a pass over the weights at load, and memory for them; each source range is
// reported through `copied` once it is copied, so the caller can drop the mapping's pages as
// the copy proceeds and the process never holds the weights twice.
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/host_memory.h"

namespace dsv4 {
namespace {

struct Range {
  const uint8_t* begin;
  const uint8_t* end;
  size_t at = 0;  // offset in the backend's buffer
};

size_t scale_bytes(const WeightView& w) {
  if (!w.scale) return 0;
  return size_t(weight_scale_rows(w.format, w.rows) * w.scale_cols * weight_format_traits(w.format).scale_bytes);
}

}  // namespace

void CpuBackend::prepare(std::span<WeightView* const> weights, const CopiedRange& copied) {
  if (!weights_in_memory_ || weights_.memory) return;
  // The bytes the views read (codes and scales), overlapping or shared ranges merged: views may
  // share a tensor (the MTP's head) or read part of one (a limited draft vocabulary).
  std::vector<Range> ranges;
  for (const WeightView* w : weights) {
    if (!w->present()) continue;
    ranges.push_back({w->data, w->data + weight_code_bytes(w->format, w->rows, w->cols)});
    if (const size_t s = scale_bytes(*w)) ranges.push_back({w->scale, w->scale + s});
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  std::vector<Range> merged;
  for (const Range& r : ranges) {
    if (!merged.empty() && r.begin <= merged.back().end) merged.back().end = std::max(merged.back().end, r.end);
    else merged.push_back(r);
  }
  size_t total = 0;
  for (Range& r : merged) {
    r.at = total;
    total += (size_t(r.end - r.begin) + 63) / 64 * 64;  // every range 64-byte aligned, as in the file
  }
  if (total == 0) return;
  weights_.memory.reset(static_cast<uint8_t*>(cpu::allocate_host(total)));
  weights_.bytes = total;
  uint8_t* const base = weights_.memory.get();

  // Copy in pieces over the threads (first touches of fresh memory are the cost: they scale with
  // threads), batch after batch, reporting each batch's sources once it is done.
  constexpr size_t kPiece = size_t(8) << 20, kBatch = size_t(512) << 20;
  struct Piece { const uint8_t* src; size_t bytes; uint8_t* dst; };
  std::vector<Piece> pieces;
  size_t batch_bytes = 0;
  auto flush = [&] {
    pool_.run(int64_t(pieces.size()), [&](int64_t i, int) {
      const Piece& p = pieces[size_t(i)];
      std::copy_n(p.src, p.bytes, p.dst);
    });
    if (copied)
      for (const Piece& p : pieces) copied(p.src, p.bytes);
    pieces.clear();
    batch_bytes = 0;
  };
  for (const Range& r : merged)
    for (size_t off = 0, n = size_t(r.end - r.begin); off < n; off += kPiece) {
      pieces.push_back({r.begin + off, std::min(kPiece, n - off), base + r.at + off});
      batch_bytes += pieces.back().bytes;
      if (batch_bytes >= kBatch) flush();
    }
  flush();

  // The views now read the copy.
  auto moved = [&](const uint8_t* p) {
    auto it = std::upper_bound(merged.begin(), merged.end(), p, [](const uint8_t* q, const Range& r) { return q < r.begin; });
    const Range& r = *std::prev(it);
    return base + r.at + (p - r.begin);
  };
  for (WeightView* w : weights) {
    if (!w->present()) continue;
    w->data = moved(w->data);
    if (scale_bytes(*w)) w->scale = moved(w->scale);
  }
}

}  // namespace dsv4

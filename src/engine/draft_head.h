// The draft head: the LM head the MTP proposer picks its drafts with, either the target's
// own or a lower-precision copy of it.
//
// Why a copy may round: a draft only has to name the token the target will choose. What is
// emitted never depends on it — greedy verification keeps the target's tokens, and sampled
// verification corrects by the draft's own distribution q, whatever q is — so a rounded head
// can only change how often drafts are accepted. It cuts what drafting reads: each draft reads
// the whole head for one row (V4-Flash: 129,280 × 4096, 1.06 GB of BF16, 80% of a draft
// step's bytes), FP8 halves that, INT4 quarters it, INT2 leaves an eighth. The MTP rescores
// each draft row's top logits with the exact head (model/head_rescore.h), so a copy only has
// to rank the target's choice among its top 64 for the draft to be the target head's own.
//
//   target  the target's head as stored (no copy)
//   fp8     e4m3 codes + one power-of-two scale per 128×128 tile (the checkpoints' FP8 layout)
//   int4    4-bit codes, value (q − 8) × a BF16 scale per 128 inputs of a row, scale = amax / 7
//           rounded to BF16 (W4A16, round to nearest)
//   int2    2-bit codes, value (q − 1.5) × a BF16 scale per 128 inputs of a row, the scale fitted
//           by least squares (quantize_int2_rows); multiplied with int8 activations (W2A8)
//   auto    where the head allows a copy (BF16 or F32, columns in groups of 128): int2 if the
//           backend multiplies INT2 with a kernel of its own (and the columns come in groups of
//           256), else int4; the target's head otherwise. The command line's default (the
//           library's is target)
//
// A copy is made once when the engine opens (owned here; it costs its bytes in memory:
// fp8 0.53 GB, int4 0.27 GB, int2 0.14 GB for V4-Flash) and covers only the rows the draft head uses.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/weight_view.h"

namespace dsv4 {

enum class DraftHeadFormat : uint8_t { Target, Fp8, Int4, Int2, Auto };

const char* draft_head_format_name(DraftHeadFormat f);
// "target" | "fp8" | "int4" | "int2" | "auto"; throws Error naming the choices otherwise.
DraftHeadFormat parse_draft_head_format(const std::string& name);
// The format a copy of `head` is made in for `f`: Auto resolved (int2, int4 or target; `int2_kernel`:
// whether the backend has a kernel of its own for an INT2 copy), others as they are.
DraftHeadFormat resolve_draft_head_format(DraftHeadFormat f, const WeightView& head, bool int2_kernel = false);
// Rows [r0, r1) of a BF16 or F32 head as f32 values (out: (r1 − r0) · cols).
void head_rows_to_f32(const WeightView& head, int64_t r0, int64_t r1, float* out);
// The view an INT2 copy of `head` would have, without its bytes (to ask a backend about it).
WeightView int2_copy_geometry(const WeightView& head);

class DraftHead {
 public:
  // A copy of the first `rows` rows of `head` (BF16 or F32, any rows ≤ head.rows; 0 = all) in
  // `format` (not Target), quantized on `threads` threads (0 = all cores).
  DraftHead(const WeightView& head, DraftHeadFormat format, int64_t rows = 0, int threads = 0);
  DraftHead(const DraftHead&) = delete;
  DraftHead& operator=(const DraftHead&) = delete;

  const WeightView& view() const { return view_; }
  WeightView& view() { return view_; }  // for Backend::prepare (which may move it)
  DraftHeadFormat format() const { return format_; }
  // Frees the copy's bytes when the view no longer reads them (a backend placed them elsewhere).
  void release_if_moved();

 private:
  DraftHeadFormat format_;
  std::vector<uint8_t> codes_, scales_;
  WeightView view_;
};

}  // namespace dsv4

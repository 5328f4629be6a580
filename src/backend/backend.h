// The operations the model is written against. The model (src/model) composes these;
// backends (src/backend/cpu, later src/backend/cuda) implement them. Ops know nothing
// about layers or the checkpoint: they see tensors, weight views and small host-side
// descriptions of which cache rows to use.
//
// Precision contract (the DeepSeek reference's): tensors are F32 on the host side of
// the interface; where the reference holds a value in bf16 the op rounds its output to
// bf16 ("bf16 values stored in f32"). Each op computes every output row in the same
// order whatever the number of rows, so results never depend on how tokens are batched.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "backend/weight_view.h"
#include "cache/row_pool.h"
#include "core/device_memory.h"
#include "core/scoring_func.h"
#include "core/tensor.h"

namespace dsv4 {

enum class ActQuant : uint8_t {
  ByWeight,  // FP8/FP4 weights: quantize activations to e4m3 per 128 inputs (power-of-two scales)
  None,      // use activations as they are (wo_a: FP8 weights applied in bf16)
};

struct LinearOptions {
  ActQuant act_quant = ActQuant::ByWeight;
  bool round_bf16 = true;  // bf16 output (FP8/FP4/BF16 GEMMs); false = fp32 (router, compressor, head)
};

// RoPE frequencies of one layer kind: f_i = theta^(-2i/r), optionally YaRN-ramped.
struct RopeSpec {
  int64_t rope_dims = 0;
  double theta = 10000.0;
  bool yarn = false;
  double factor = 1.0, beta_fast = 32.0, beta_slow = 1.0;
  int64_t original_max_position = 0;
};

// How one query row attends: the last `window` raw rows up to `position` of its sequence
// (kv table), plus compressed entries of that sequence: either the first `num_entries`
// (ratio > 0 without indexer) or the indexer's selection for this row.
struct AttentionRow {
  const RowTable* kv = nullptr;        // raw KV rows by position (bf16 values)
  const RowTable* entries = nullptr;   // compressed entries (may be null)
  int64_t position = 0;
  int64_t window = 0;
  int64_t num_entries = 0;             // entries visible to this row
};

// One compressed entry to pool: from the per-position compressor state rows of its sequence.
struct PoolRequest {
  const RowTable* state = nullptr;     // rows [kv | score+ape] of width 2·proj, f32
  int64_t entry = 0;                   // entry i pools positions [i·ratio, (i+1)·ratio)
};

// The indexer scores of one query row over the compressed indexer keys of its sequence.
struct IndexerRow {
  const RowTable* keys = nullptr;      // indexer entries (bf16 values)
  int64_t num_entries = 0;             // complete entries visible to this row
};

class Backend : public DeviceMemory {
 public:
  ~Backend() override = default;
  virtual const char* name() const = 0;

  // ---- weights
  // Called once per model, before its first pass, with every weight view the model uses: a
  // backend may place or repack the weights in its own memory and rewrite the views (a GPU
  // backend uploads them), calling `copied` with each source range it no longer reads (the
  // caller may release those pages). The reference backend reads the mapped checkpoint in place;
  // the CPU backend too, unless BackendOptions::weights_in_memory (cpu_weights.cc).
  using CopiedRange = std::function<void(const void* data, size_t bytes)>;
  virtual void prepare(std::span<WeightView* const> weights, const CopiedRange& copied = {}) {
    (void)weights;
    (void)copied;
  }

  // Waits until every op issued so far has completed. Ops of host backends complete before they
  // return; a device backend queues them, and to_host() waits for the ops before it.
  virtual void synchronize() {}

  // ---- data movement (host <-> backend tensors and cache rows)
  virtual void to_host(const Tensor& t, void* dst) = 0;
  virtual void from_host(Tensor& t, const void* src) = 0;
  // dst row i = src row rows[i] (rows of the first dimension).
  virtual void gather_rows(const Tensor& src, std::span<const int64_t> rows, Tensor& dst) = 0;
  // Row rows[i] of *tables[i] = src row i (converted to the table's storage type): one call per
  // layer and pass, however many sequences the rows belong to; a null table skips its row. The
  // rows must be reserved (RowTable::ensure_rows) by the caller: ops never allocate cache blocks.
  virtual void store_rows(std::span<RowTable* const> tables, std::span<const int64_t> rows, const Tensor& src) = 0;
  // dst row i = row rows[i] of *tables[i] (as f32): the inverse of store_rows, one call for the
  // rows of many sequences.
  virtual void load_rows(std::span<const RowTable* const> tables, std::span<const int64_t> rows, Tensor& dst) = 0;
  // y row i = [parts[0] row i | parts[1] row i | ...] (f32; every part has y's rows).
  virtual void concat_cols(std::span<const Tensor> parts, Tensor& y) = 0;

  // Rows [0, rows) of the ops that follow (until the next call) are a prompt's: a backend may
  // compute their products with kernels for many rows (the CPU backend: AMX tiles), which round
  // differently from those of the other rows. Either kind stays batch-invariant on its own: a
  // row's results depend on its kind, never on what else is in the pass.
  virtual void set_prompt_rows(int64_t rows) { (void)rows; }

  // ---- dense math
  // Whether linear() multiplies weights encoded and shaped as `w` (its bytes are not read) with a
  // kernel made for them rather than a generic scalar path: an optional encoding, such as the
  // draft head's INT2 copy, is worth choosing only then.
  virtual bool has_kernel_for(const WeightView& w) const { (void)w; return false; }
  // y[n, m] = sum_k x[n, k] w[m, k]
  virtual void linear(const Tensor& x, const WeightView& w, Tensor& y, LinearOptions opt = {}) = 0;
  // y[i, 0] = x · row rows[i] of w for x [1, K] and w of BF16 or F32 rows, each value the one
  // linear() gives that row in a pass over all of w (the same sums): the exact head's rows that a
  // bounded argmax names (model/argmax_head.h). By default one linear() per row.
  virtual void linear_rows(const Tensor& x, const WeightView& w, std::span<const int64_t> rows, Tensor& y) {
    const int64_t row_bytes = w.cols * (w.format == WeightFormat::F32 ? 4 : 2);
    for (size_t i = 0; i < rows.size(); ++i) {
      WeightView row = w;
      row.rows = 1;
      row.data = w.data + rows[i] * row_bytes;
      Tensor out = y.slice(int64_t(i), int64_t(i) + 1);
      linear(x, row, out, {ActQuant::None, /*round_bf16=*/false});
    }
  }
  // Grouped low-rank output: x [N, G·K] split into G groups, group g times rows [g·M/G, (g+1)·M/G) of w.
  virtual void grouped_linear(const Tensor& x, const WeightView& w, int64_t groups, Tensor& y,
                              LinearOptions opt = {}) = 0;
  // y = weight · x / sqrt(mean(x²) + eps) over the last dim, rounded to bf16 (weight may be unbound).
  virtual void rms_norm(const Tensor& x, const WeightView& weight, float eps, Tensor& y) = 0;
  // Per-head RMS normalisation of q [N, H, d] in place, with the reference's bf16 arithmetic.
  virtual void head_rms_norm(Tensor& q, float eps) = 0;
  // Rotates the last rope_dims of each head of x [N, heads, width] (interleaved pairs) by
  // positions[n]·f_i (inverse: by −positions[n]·f_i); in place, bf16 output.
  virtual void rope(Tensor& x, std::span<const int64_t> positions, const RopeSpec& spec, bool inverse) = 0;
  // FP8 fake quantization (quantize + dequantize) of columns [0, cols) of x [N, W], blocks of `block`.
  virtual void fake_quant_fp8(Tensor& x, int64_t cols, int block) = 0;
  // Walsh–Hadamard transform (scale 1/sqrt(w)) of each w-wide row of x, bf16, then FP4 fake quant (blocks of 32).
  virtual void hadamard_fp4(Tensor& x) = 0;
  // y = round_bf16(x · s)
  virtual void scale(const Tensor& x, float s, Tensor& y) = 0;
  // y = round_bf16(a + b)   (b may broadcast: b [N, W] added to each of the hc rows of a [N, hc, W])
  virtual void add(const Tensor& a, const Tensor& b, Tensor& y) = 0;

  // ---- hyper-connections
  struct HcPreOut { Tensor u, post, comb, mixes, pre; };  // mixes/pre may be empty (not wanted)
  virtual void hc_pre(const Tensor& x, const HcWeights& w, int64_t sinkhorn_iters, float hc_eps,
                      float norm_eps, HcPreOut& out) = 0;
  virtual void hc_post(const Tensor& x, const Tensor& f, const Tensor& post, const Tensor& comb, Tensor& y) = 0;
  virtual void hc_head(const Tensor& x, const HcHeadWeights& w, float hc_eps, float norm_eps, Tensor& y) = 0;
  // y [N, D] = round_bf16((Σ_j X_j) / hc) of x [N, hc, D], summed in stream order (the plain mean of
  // the streams that the DSpark drafter taps).
  virtual void stream_mean(const Tensor& x, Tensor& y) = 0;

  // ---- embedding
  virtual void embed(const WeightView& table, std::span<const int32_t> tokens, int64_t copies, Tensor& out) = 0;

  // ---- attention
  virtual void sparse_attention(const Tensor& q, std::span<const AttentionRow> rows,
                                const Tensor* selected, const WeightView& sink, float softmax_scale,
                                Tensor& out) = 0;

  // ---- compressor and indexer
  // state row of position positions[n] (in states[n], reserved) = [kv[n] | score[n] + ape[positions[n] % ratio]]
  virtual void compressor_store(const Tensor& kv, const Tensor& score, const WeightView& ape,
                                std::span<const int64_t> positions, std::span<RowTable* const> states) = 0;
  // pooled[m] = sum over the entry's slots of softmax(score) ⊙ kv (per dimension), fp32
  virtual void compressor_pool(std::span<const PoolRequest> requests, int64_t ratio, bool overlap,
                               int64_t width, Tensor& pooled) = 0;
  // Indexer: scores[n, t] = sum_h w[n,h]·relu(q[n,h]·key_t) (bf16 steps as the reference) for the
  // visible entries, −inf beyond; selected[n] = indices of the top-k (−1 padded), highest first.
  virtual void indexer_select(const Tensor& q, const Tensor& weights, std::span<const IndexerRow> rows,
                              int64_t top_k, Tensor& selected, Tensor* scores) = 0;

  // ---- mixture of experts
  struct RouteParams {
    int64_t top_k = 0;
    ScoringFunc func = ScoringFunc::SqrtSoftplus;
    float route_scale = 1.0f;
    const WeightView* bias = nullptr;     // score routing
    const WeightView* tid2eid = nullptr;  // hash routing (by token id)
    std::span<const int32_t> tokens;
  };
  virtual void moe_route(const Tensor& logits, const RouteParams& p, Tensor& weights, Tensor& indices) = 0;
  // routed[n] = sum over the row's selected experts, in ascending expert id, of
  //   weight · w2(silu(min(w1 x, L)) · clamp(w3 x, ±L))   (each expert's output rounded to bf16), fp32
  virtual void moe_experts(const Tensor& x, const Tensor& weights, const Tensor& indices,
                           std::span<const ExpertWeights> experts, float swiglu_limit, Tensor& routed) = 0;
  // h = round_bf16(silu(min(g, L)) · clamp(u, ±L))   (the shared expert's activation)
  virtual void swiglu(const Tensor& g, const Tensor& u, float swiglu_limit, Tensor& h) = 0;
};

// Rows of one table (reserved here) from src: store_rows for a single sequence.
inline void store_table_rows(Backend& be, RowTable& table, std::span<const int64_t> rows, const Tensor& src) {
  std::vector<RowTable*> tables(rows.size(), &table);
  for (int64_t r : rows) table.ensure_rows(r + 1);
  be.store_rows(tables, rows, src);
}

}  // namespace dsv4

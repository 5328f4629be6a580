// The reference backend: every op of backend.h in plain scalar C++, one short function per op,
// written to be read next to the DeepSeek-V4 model specification ("spec §N", as in src/model)
// and the CPU backend (src/backend/cpu). No SIMD, no threads, no buffers kept between
// calls: what an op computes is all in its function.
//
// It computes what the CPU backend computes — the same bf16 rounding points, FP8/FP4
// activation and weight formats, indexer steps, top-k tie order, Sinkhorn iterations and MoE
// summation order — so the model's golden tests pass on it, and tests/backend compares every
// CPU op against it. Where the CPU kernels sum in a SIMD lane order that the DeepSeek reference
// does not fix, this backend sums in a plain order of its own (attention scores and value sums:
// sequential; matrix products: each scale block in 8 interleaved partial sums, see ref_gemm.cc);
// the comparison allows for that with tolerances derived from the data.
//
// Each a·b + c here means two roundings, as the reference's separate tensor ops (the build
// turns off implicit FMA contraction, which GCC applies in C++ even with -std=c++20).
//
// Files are named after the CPU backend's, so an op's math and its fast form are found by the
// same name: reference_backend.cc (memory, data movement, element-wise ops: cpu_backend.cc),
// ref_gemm.h/.cc (block-scaled products: gemm.h/.cc), ref_linear.cc, ref_norm_rope.cc, ref_hc.cc,
// ref_attention.cc, ref_compressor.cc, ref_indexer.cc (with the scores of index_scores.cc), ref_moe.cc.
#pragma once
#include "backend/backend.h"

namespace dsv4 {

class ReferenceBackend final : public Backend {
 public:
  const char* name() const override { return "reference"; }

  // Weights are read in place, as the CPU backend reads the mapped checkpoint: views stay as they are.

  void* allocate(size_t bytes) override;
  void release(void* p) override;

  void to_host(const Tensor& t, void* dst) override;
  void from_host(Tensor& t, const void* src) override;
  void gather_rows(const Tensor& src, std::span<const int64_t> rows, Tensor& dst) override;
  void store_rows(std::span<RowTable* const> tables, std::span<const int64_t> rows, const Tensor& src) override;
  void load_rows(std::span<const RowTable* const> tables, std::span<const int64_t> rows, Tensor& dst) override;
  void concat_cols(std::span<const Tensor> parts, Tensor& y) override;

  // Ignored: every row takes the same path here, so a row's result never depends on its kind.
  void set_prompt_rows(int64_t rows) override { (void)rows; }

  void linear(const Tensor& x, const WeightView& w, Tensor& y, LinearOptions opt) override;
  void grouped_linear(const Tensor& x, const WeightView& w, int64_t groups, Tensor& y, LinearOptions opt) override;
  void rms_norm(const Tensor& x, const WeightView& weight, float eps, Tensor& y) override;
  void head_rms_norm(Tensor& q, float eps) override;
  void rope(Tensor& x, std::span<const int64_t> positions, const RopeSpec& spec, bool inverse) override;
  void fake_quant_fp8(Tensor& x, int64_t cols, int block) override;
  void hadamard_fp4(Tensor& x) override;
  void scale(const Tensor& x, float s, Tensor& y) override;
  void add(const Tensor& a, const Tensor& b, Tensor& y) override;

  void hc_pre(const Tensor& x, const HcWeights& w, int64_t sinkhorn_iters, float hc_eps, float norm_eps,
              HcPreOut& out) override;
  void hc_post(const Tensor& x, const Tensor& f, const Tensor& post, const Tensor& comb, Tensor& y) override;
  void hc_head(const Tensor& x, const HcHeadWeights& w, float hc_eps, float norm_eps, Tensor& y) override;
  void stream_mean(const Tensor& x, Tensor& y) override;

  void embed(const WeightView& table, std::span<const int32_t> tokens, int64_t copies, Tensor& out) override;

  void sparse_attention(const Tensor& q, std::span<const AttentionRow> rows, const Tensor* selected,
                        const WeightView& sink, float softmax_scale, Tensor& out) override;

  void compressor_store(const Tensor& kv, const Tensor& score, const WeightView& ape,
                        std::span<const int64_t> positions, std::span<RowTable* const> states) override;
  void compressor_pool(std::span<const PoolRequest> requests, int64_t ratio, bool overlap, int64_t width,
                       Tensor& pooled) override;
  void indexer_select(const Tensor& q, const Tensor& weights, std::span<const IndexerRow> rows, int64_t top_k,
                      Tensor& selected, Tensor* scores) override;

  void moe_route(const Tensor& logits, const RouteParams& p, Tensor& weights, Tensor& indices) override;
  void moe_experts(const Tensor& x, const Tensor& weights, const Tensor& indices,
                   std::span<const ExpertWeights> experts, float swiglu_limit, Tensor& routed) override;
  void swiglu(const Tensor& g, const Tensor& u, float swiglu_limit, Tensor& h) override;
};

}  // namespace dsv4

// The portable CPU backend: multithreaded (one persistent pool), SIMD kernels chosen at
// run time (AVX2/FMA everywhere, AVX-512 where present), weights read in place from the
// mapped checkpoint or copied into its memory on huge pages (cpu_weights.cc).
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/index_scores.h"
#include "backend/cpu/op_profile.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace dsv4 {

class CpuBackend final : public Backend {
 public:
  // isa: the kernels' instruction set (default: the best this machine has, see cpu_features.h).
  explicit CpuBackend(int num_threads = 0, CpuIsa isa = default_isa());
  ~CpuBackend() override;

  const char* name() const override { return "cpu"; }
  // With weights_in_memory, prepare() copies every weight into one buffer on huge pages.
  void set_weights_in_memory(bool on) { weights_in_memory_ = on; }
  void prepare(std::span<WeightView* const> weights, const CopiedRange& copied) override;
  size_t weight_bytes_in_memory() const { return weights_.bytes; }
  int num_threads() const { return pool_.size(); }
  ThreadPool& pool() { return pool_; }
  CpuIsa isa() const { return isa_; }

  // Runs a prepared product over all outputs of w, split over the threads; side_task (if any)
  // runs as one more task, overlapping the product.
  void gemm(const cpu::GemmKernel& kernel, const cpu::PreparedInput& in, const WeightView& w, float* y, int64_t ldy,
            bool round_bf16, const ThreadPool::Task* side_task = nullptr);

  void* allocate(size_t bytes) override;
  void release(void* p) override;

  void to_host(const Tensor& t, void* dst) override;
  void from_host(Tensor& t, const void* src) override;
  void gather_rows(const Tensor& src, std::span<const int64_t> rows, Tensor& dst) override;
  void store_rows(std::span<RowTable* const> tables, std::span<const int64_t> rows, const Tensor& src) override;
  void load_rows(std::span<const RowTable* const> tables, std::span<const int64_t> rows, Tensor& dst) override;
  void concat_cols(std::span<const Tensor> parts, Tensor& y) override;

  void set_prompt_rows(int64_t rows) override { prompt_rows_ = rows; }
  bool has_kernel_for(const WeightView& w) const override;
  void linear(const Tensor& x, const WeightView& w, Tensor& y, LinearOptions opt) override;
  void linear_rows(const Tensor& x, const WeightView& w, std::span<const int64_t> rows, Tensor& y) override;
  void grouped_linear(const Tensor& x, const WeightView& w, int64_t groups, Tensor& y,
                      LinearOptions opt) override;
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

  // Per-op wall times when DSV4_PROFILE_OPS is set (else null); clear() to start a measurement.
  OpProfile* op_profile() { return profile_.get(); }

  // Per-thread scratch of at least `bytes` (valid until the next call on that worker).
  float* scratch(int worker, size_t floats);

 private:
  const std::vector<float>& rope_frequencies(const RopeSpec& spec);
  // Runs fn(task, worker) for tasks 0..n-1 on the pool, or inline when `work` (bytes streamed or
  // multiply-adds) is too small to be worth waking the workers: small models leave them asleep.
  template <class F>
  void run_tasks(int64_t n, int64_t work, F&& fn) {
    if (work < kMinParallelWork) {
      for (int64_t t = 0; t < n; ++t) fn(t, 0);
    } else {
      pool_.run(n, fn);
    }
  }
  static constexpr int64_t kMinParallelWork = int64_t(64) << 10;
  // The product kernel for w on prompt rows (AMX where the machine has it) or on the others.
  cpu::GemmKernel kernel_for(const WeightView& w, bool prompt) const;
  // Rows [0, n) of x that are prompt rows and take another kernel than the rest (else 0).
  int64_t prompt_split(const WeightView& w, int64_t n) const;
  void grouped_rows(const float* x, int64_t n, int64_t ldx, const WeightView& w, int64_t groups, float* y,
                    bool prompt, LinearOptions opt);
  // Outputs per task when splitting `rows` outputs of w applied to n rows over the threads.
  int64_t output_chunk(const WeightView& w, int64_t rows, int64_t n) const;

  CpuIsa isa_;
  int64_t prompt_rows_ = 0;
  bool weights_in_memory_ = false;
  struct PlacedWeights {
    struct Release {
      void operator()(uint8_t* p) const { cpu::release_host(p); }
    };
    std::unique_ptr<uint8_t, Release> memory;
    size_t bytes = 0;
  } weights_;
  ThreadPool pool_;
  std::unique_ptr<OpProfile> profile_;
  // Persistent buffers (they only grow: steady-state decoding allocates nothing).
  cpu::ActivationBuffer act_;                       // linear
  cpu::AlignedBuffer<uint8_t> picked_rows_;         // linear_rows: the rows gathered
  std::vector<cpu::ActivationBuffer> group_buffers_;  // grouped_linear, one per group
  std::vector<cpu::PreparedInput> grouped_inputs_;
  cpu::ActivationBuffer moe_act_x_, moe_act_h_;      // moe_experts
  cpu::ActivationBuffer moe_prompt_x_, moe_prompt_h_;  // moe_experts: prompt rows with their own kernel
  std::vector<int64_t> prompt_slots_;
  std::vector<int64_t> start_, slot_at_, position_of_, cursor_, active_;
  std::vector<int32_t> order_, route_order_;
  std::vector<float> route_scores_, route_biased_;   // moe_route
  cpu::AlignedBuffer<float> moe_x_, moe_g_, moe_u_, moe_h_, moe_y_;
  std::vector<std::vector<float>> attn_kv_;        // sparse_attention: a KV set in f32, per worker
  std::vector<std::vector<int64_t>> attn_entries_;
  std::vector<float> hc_mixes_, hc_weights_, hc_rs_;  // hyper-connections
  std::vector<float> idx_keys_, idx_score_;        // indexer_select
  std::vector<int32_t> idx_order_;
  cpu::IndexQuery idx_query_;
  std::vector<std::vector<float>> scratch_;
  std::mutex rope_mutex_;
  std::vector<std::pair<RopeSpec, std::vector<float>>> rope_cache_;
};

}  // namespace dsv4

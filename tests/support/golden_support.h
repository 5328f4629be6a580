// Helpers of the golden component tests (tests/model/golden_*_test.cc): the tiny-a
// checkpoint and the reference's op-level tensors (golden_ops.safetensors), opened once
// per process; per-tensor tolerances from golden_ops.json; the README's metrics (per-row
// relative L2, index-set differences, gate and indexer-score comparisons); and a pass
// set up at the golden call's positions, with golden tensors loaded into it.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "model/mtp.h"
#include "model/transformer.h"
#include "support/test_support.h"

namespace dsv4::test {

// The two calls of the op-level data: prefill = one call over positions 0..41,
// decode = the single-token call at position 42 right after it.
struct GoldenPhase {
  std::string name;    // "prefill" | "decode"
  int64_t first = 0;   // position of the call's first row
  int64_t rows = 0;
  bool decode() const { return name == "decode"; }
};
GoldenPhase prefill_phase();  // positions 0..P-1
GoldenPhase decode_phase();   // position P
// The MTP block's two op-level calls (`mtp.prefill.*` / `mtp.decode.*`): prefill = positions
// 0..P-2 (inputs target.hidden[t] and tokens[t+1]), decode = position P-1.
GoldenPhase mtp_prefill_phase();
GoldenPhase mtp_decode_phase();
GoldenPhase mtp_phase(const std::string& name);  // "prefill" | "decode"

// (layer, "prefill" | "decode"): the parameter of the per-layer golden suites, named "L1_decode".
using LayerPhase = std::tuple<int, std::string>;
inline std::string layer_phase_name(const ::testing::TestParamInfo<LayerPhase>& info) {
  return "L" + std::to_string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
}

// begin, begin + 1, ..., begin + count - 1 (positions or cache entries).
inline std::vector<int64_t> iota(int64_t begin, int64_t count) {
  std::vector<int64_t> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[size_t(i)] = begin + i;
  return v;
}

// Everything the golden tests read. One instance per process (golden()); the model's
// weights view the mapped checkpoint; the backend is the tests' (test_backend()).
class GoldenData {
 public:
  GoldenData();
  GoldenData(const GoldenData&) = delete;
  GoldenData& operator=(const GoldenData&) = delete;

  bool has(const std::string& name) const;  // in golden_ops.safetensors
  const TensorInfo& info(const std::string& name) const;
  std::vector<float> f32(const std::string& name) const;
  std::vector<int64_t> i64(const std::string& name) const;
  std::vector<float> outputs_f32(const std::string& name) const;  // golden.safetensors (model outputs)
  const TensorInfo& output_info(const std::string& name) const;   // golden.safetensors

  const nlohmann::json& meta() const { return meta_; }      // golden_ops.json
  const nlohmann::json& summary() const { return summary_; }  // golden.json
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  Transformer& model() { return *model_; }
  MtpModule& mtp();  // the checkpoint's MTP module (throws if it has none)
  Backend& backend() { return *backend_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t prompt_len() const { return prompt_len_; }

 private:
  ModelConfig config_;
  TensorStore checkpoint_;
  ModelWeights weights_;
  TensorStore ops_, golden_;
  nlohmann::json meta_, summary_;
  std::vector<int32_t> tokens_;
  int64_t prompt_len_ = 0;
  std::unique_ptr<Backend> backend_ = make_test_backend();
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<MtpModule> mtp_;
};
GoldenData& golden();

// ---- tolerances (golden_ops.json "tolerance") and the README's metrics

struct Tolerance {
  bool index = false;        // rows_differ applies (index tensors)
  double rel_med = 0, rel_max = 0;
  int64_t rows_differ = 0;
};
Tolerance tolerance(const std::string& tensor);  // throws if golden_ops.json has none

// Per-row relative L2 error, entries where `mask` is false excluded (mask empty: none).
std::vector<double> masked_row_rel_l2(const std::vector<float>& computed, const std::vector<float>& golden,
                                      int64_t cols, const std::vector<bool>& mask);

// Rows whose index set (ignoring -1 and order) differs; `offset` is added to every computed
// index >= 0 first (the golden indices are offsets into the attention's kv list).
int64_t index_rows_differ(const std::vector<int64_t>& computed, const std::vector<int64_t>& golden, int64_t cols,
                          int64_t offset = 0);

// gate.weights per expert on the rows whose expert set matches; the others counted.
struct GateComparison {
  std::vector<double> errors;   // one per matching row
  int64_t rows_differ = 0;      // rows whose expert set differs
};
GateComparison compare_gate(const std::vector<float>& weights, const std::vector<int64_t>& indices,
                            const std::vector<float>& golden_weights, const std::vector<int64_t>& golden_indices,
                            int64_t k);

// indexer.scores: -inf entries must coincide (counted otherwise), finite ones compared per row.
struct ScoresComparison {
  std::vector<double> errors;
  int64_t inf_mismatches = 0;
};
ScoresComparison compare_scores(const std::vector<float>& computed, const std::vector<float>& golden, int64_t cols);

// Pass/fail against the tolerance, with the numbers in the message; also printed,
// recorded as test properties and kept for the end-of-run table of the tightest tensors.
// `label` names the tensor (golden name, "L1.prefill.q"); `tol_name` the tolerance entry
// when it differs; `note` says how the value was computed.
::testing::AssertionResult check_errors(const std::string& label, const std::vector<double>& errors,
                                        const Tolerance& tol, const std::string& note = "");
::testing::AssertionResult check_rows_differ(const std::string& label, int64_t rows_differ, int64_t rows,
                                             int64_t allowed, const std::string& note = "");
// Computed vs golden (per-row relative L2 over the golden tensor's last dims).
::testing::AssertionResult check_tensor(const std::string& name, const std::vector<float>& computed,
                                        const std::string& tol_name = "", const std::string& note = "");

// ---- a pass at the golden call's positions

// A fresh sequence cache and a pass over the phase's rows (tokens = golden tokens at those
// positions), with a tracer for the components that report through it.
class GoldenPass {
 public:
  explicit GoldenPass(const GoldenPhase& phase);
  GoldenPass(std::vector<int64_t> positions, const std::string& phase_name);
  // A pass with a given sequence cache (e.g. MtpModule::new_sequence()) whose row at position
  // t carries the golden token t + token_offset (the MTP's input token: offset 1).
  GoldenPass(const GoldenPhase& phase, std::unique_ptr<SequenceCache> sequence, int64_t token_offset);

  Pass& pass() { return pass_; }
  Backend& be() { return golden().backend(); }
  LayerCache& cache(size_t layer) { return seq_->layer(layer); }
  Tracer& tracer() { return tracer_; }

  Tensor alloc(const std::vector<int64_t>& shape, DType dtype = DType::F32);
  Tensor load(const std::string& golden_name);  // F32 tensor of the golden shape
  Tensor load(const std::vector<float>& values, const std::vector<int64_t>& shape);
  Tensor load_i32(const std::vector<int64_t>& values, const std::vector<int64_t>& shape);
  std::vector<float> host(const Tensor& t);
  std::vector<int64_t> host_i64(const Tensor& t);  // I32 tensors
  std::vector<float> traced(const std::string& name) const;  // throws if not recorded
  // Starts the next call of the same sequence (scratch reset, tracer cleared).
  void next_call(std::vector<int64_t> positions, const std::string& phase_name);

 private:
  void set_rows(std::vector<int64_t> positions, const std::string& phase_name);
  Workspace ws_;
  Tracer tracer_;
  Pass pass_;
  std::unique_ptr<SequenceCache> seq_;
  int64_t token_offset_ = 0;
};

std::string layer_scope(int64_t layer);  // "L3"

// golden.safetensors rows [begin, end) of a [rows, ...] tensor, flattened.
std::vector<float> output_rows(const std::string& name, int64_t begin, int64_t end);

// The RoPE table [T, r/2, (cos, sin)] of `spec` for positions 0..T-1 (the layout of the
// golden `freqs.*`), recovered from the backend's rope op: rotating the pairs (1, 0) gives
// (cos θ, sin θ) rounded to bf16; rotating that back by -θ gives (≈1, |v|·sin(φ - θ)) whose
// small second component measures the rounding, so θ = φ - asin(ε / |v|) (φ the angle of the
// bf16 pair) is recovered to ~1e-5.
std::vector<float> rope_table(const RopeSpec& spec, int64_t T);

}  // namespace dsv4::test

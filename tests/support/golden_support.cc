#include "support/golden_support.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <set>

#include "core/error.h"
#include "model/weights.h"

namespace dsv4::test {

namespace fs = std::filesystem;

GoldenPhase prefill_phase() { return {"prefill", 0, golden().prompt_len()}; }
GoldenPhase decode_phase() { return {"decode", golden().prompt_len(), 1}; }
GoldenPhase mtp_prefill_phase() { return {"prefill", 0, golden().prompt_len() - 1}; }
GoldenPhase mtp_decode_phase() { return {"decode", golden().prompt_len() - 1, 1}; }
GoldenPhase mtp_phase(const std::string& name) { return name == "decode" ? mtp_decode_phase() : mtp_prefill_phase(); }

std::string layer_scope(int64_t layer) { return "L" + std::to_string(layer); }

// ---- GoldenData

namespace {

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(cat("cannot open ", path.string()));
  return nlohmann::json::parse(in);
}

}  // namespace

GoldenData::GoldenData() {
  const fs::path dir = tiny_a_dir();
  config_ = load_config(dir / "config.json");
  checkpoint_ = TensorStore::open(dir);
  weights_ = bind_weights(checkpoint_, config_);
  ops_ = TensorStore::open(dir / "golden_ops.safetensors");
  golden_ = TensorStore::open(dir / "golden.safetensors");
  meta_ = read_json(dir / "golden_ops.json");
  summary_ = read_json(dir / "golden.json");
  for (int64_t t : read_i64(golden_.get("tokens"))) tokens_.push_back(int32_t(t));
  prompt_len_ = read_i64(golden_.get("prompt_len"))[0];
  model_ = std::make_unique<Transformer>(config_, weights_, *backend_);
  if (!weights_.mtp.empty()) mtp_ = std::make_unique<MtpModule>(*model_, weights_.mtp[0]);
}

MtpModule& GoldenData::mtp() {
  if (!mtp_) throw Error("the tiny-a checkpoint has no MTP module (mtp.0.*)");
  return *mtp_;
}

bool GoldenData::has(const std::string& name) const { return ops_.find(name) != nullptr; }
const TensorInfo& GoldenData::info(const std::string& name) const { return ops_.get(name); }
std::vector<float> GoldenData::f32(const std::string& name) const { return read_f32(ops_.get(name)); }
std::vector<int64_t> GoldenData::i64(const std::string& name) const { return read_i64(ops_.get(name)); }
std::vector<float> GoldenData::outputs_f32(const std::string& name) const { return read_f32(golden_.get(name)); }
const TensorInfo& GoldenData::output_info(const std::string& name) const { return golden_.get(name); }

GoldenData& golden() {
  static GoldenData* data = new GoldenData();  // shared by every golden test of the process
  return *data;
}

// ---- tolerances and metrics

Tolerance tolerance(const std::string& tensor) {
  const nlohmann::json& all = golden().meta().at("tolerance");
  if (!all.contains(tensor)) throw Error(cat("golden_ops.json has no tolerance for '", tensor, "'"));
  const nlohmann::json& t = all.at(tensor);
  Tolerance tol;
  if (t.contains("rows_differ")) {
    tol.index = true;
    tol.rows_differ = t.at("rows_differ").get<int64_t>();
  } else {
    tol.rel_med = t.at("rel_med").get<double>();
    tol.rel_max = t.at("rel_max").get<double>();
  }
  return tol;
}

std::vector<double> masked_row_rel_l2(const std::vector<float>& computed, const std::vector<float>& golden_values,
                                      int64_t cols, const std::vector<bool>& mask) {
  if (mask.empty()) return row_rel_l2(computed, golden_values, cols);
  std::vector<float> c = computed, g = golden_values;
  for (size_t i = 0; i < g.size(); ++i)
    if (!mask[i]) c[i] = g[i] = 0.0f;
  return row_rel_l2(c, g, cols);
}

namespace {

std::set<int64_t> index_set(const int64_t* v, int64_t cols, int64_t offset) {
  std::set<int64_t> s;
  for (int64_t j = 0; j < cols; ++j)
    if (v[j] >= 0) s.insert(v[j] + offset);
  return s;
}

}  // namespace

int64_t index_rows_differ(const std::vector<int64_t>& computed, const std::vector<int64_t>& golden_values,
                          int64_t cols, int64_t offset) {
  DSV4_CHECK(computed.size() == golden_values.size(), "index_rows_differ: ", computed.size(), " vs ",
             golden_values.size(), " values");
  int64_t differ = 0;
  for (size_t r = 0; r < golden_values.size() / size_t(cols); ++r)
    differ += index_set(computed.data() + r * size_t(cols), cols, offset) !=
              index_set(golden_values.data() + r * size_t(cols), cols, 0);
  return differ;
}

GateComparison compare_gate(const std::vector<float>& weights, const std::vector<int64_t>& indices,
                            const std::vector<float>& golden_weights, const std::vector<int64_t>& golden_indices,
                            int64_t k) {
  GateComparison out;
  std::vector<float> c, g;  // matching rows, weights in ascending expert order
  for (size_t r = 0; r < golden_indices.size() / size_t(k); ++r) {
    std::vector<std::pair<int64_t, float>> a, b;
    for (int64_t j = 0; j < k; ++j) {
      a.emplace_back(indices[r * size_t(k) + size_t(j)], weights[r * size_t(k) + size_t(j)]);
      b.emplace_back(golden_indices[r * size_t(k) + size_t(j)], golden_weights[r * size_t(k) + size_t(j)]);
    }
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    bool same = true;
    for (int64_t j = 0; j < k; ++j) same &= a[size_t(j)].first == b[size_t(j)].first;
    if (!same) {
      ++out.rows_differ;
      continue;
    }
    for (int64_t j = 0; j < k; ++j) {
      c.push_back(a[size_t(j)].second);
      g.push_back(b[size_t(j)].second);
    }
  }
  if (!g.empty()) out.errors = row_rel_l2(c, g, k);
  return out;
}

ScoresComparison compare_scores(const std::vector<float>& computed, const std::vector<float>& golden_values,
                                int64_t cols) {
  DSV4_CHECK(computed.size() == golden_values.size(), "compare_scores: ", computed.size(), " vs ",
             golden_values.size(), " values");
  ScoresComparison out;
  std::vector<bool> finite(golden_values.size());
  for (size_t i = 0; i < golden_values.size(); ++i) {
    const bool gi = std::isinf(golden_values[i]) && golden_values[i] < 0;
    const bool ci = std::isinf(computed[i]) && computed[i] < 0;
    out.inf_mismatches += gi != ci;
    finite[i] = !gi && !ci;
  }
  out.errors = masked_row_rel_l2(computed, golden_values, cols, finite);
  return out;
}

// ---- reporting

namespace {

struct Measured {
  std::string label;
  double median, max, tol_med, tol_max, ratio;
};

class SummaryTable : public ::testing::Environment {
 public:
  void add(Measured m) {
    std::lock_guard<std::mutex> lock(mutex_);
    rows_.push_back(std::move(m));
  }
  void TearDown() override {
    if (rows_.empty()) return;
    std::vector<Measured> rows = rows_;
    std::sort(rows.begin(), rows.end(), [](const Measured& a, const Measured& b) { return a.ratio > b.ratio; });
    std::printf("\n[golden] %zu float checks; the tightest (error / tolerance, the larger of median and max):\n",
                rows.size());
    for (size_t i = 0; i < std::min<size_t>(rows.size(), 15); ++i)
      std::printf("[golden]   %-58s median %.3e / %.3e  max %.3e / %.3e  ratio %.3f\n", rows[i].label.c_str(),
                  rows[i].median, rows[i].tol_med, rows[i].max, rows[i].tol_max, rows[i].ratio);
  }

 private:
  std::mutex mutex_;
  std::vector<Measured> rows_;
};

SummaryTable* summary_table() {
  static SummaryTable* table = [] {
    auto* t = new SummaryTable();
    ::testing::AddGlobalTestEnvironment(t);  // gtest owns it
    return t;
  }();
  return table;
}
// Registered before main() so that the environment's TearDown runs after all tests.
[[maybe_unused]] const SummaryTable* const kRegistered = summary_table();

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string property_key(const std::string& label) {
  std::string k;
  for (char ch : label) k += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_') ? ch : '_';
  return k;
}

}  // namespace

::testing::AssertionResult check_errors(const std::string& label, const std::vector<double>& errors,
                                        const Tolerance& tol, const std::string& note) {
  const ErrorSummary s = summarize(errors);
  const double ratio = std::max(tol.rel_med > 0 ? s.median / tol.rel_med : 0.0, tol.rel_max > 0 ? s.max / tol.rel_max : 0.0);
  const std::string full = label + (note.empty() ? "" : " (" + note + ")");
  std::printf("[golden] %-60s rows %3zu  median %.3e (tol %.3e)  max %.3e (tol %.3e)  ratio %.3f\n", full.c_str(),
              errors.size(), s.median, tol.rel_med, s.max, tol.rel_max, ratio);
  ::testing::Test::RecordProperty(property_key(label) + ".median", fmt(s.median));
  ::testing::Test::RecordProperty(property_key(label) + ".max", fmt(s.max));
  summary_table()->add({full, s.median, s.max, tol.rel_med, tol.rel_max, ratio});
  if (errors.empty()) return ::testing::AssertionFailure() << full << ": no rows to compare";
  if (std::isnan(s.median) || std::isnan(s.max) || s.median > tol.rel_med || s.max > tol.rel_max)
    return ::testing::AssertionFailure() << full << ": per-row relative L2 median " << fmt(s.median) << " (tolerance "
                                         << fmt(tol.rel_med) << "), max " << fmt(s.max) << " (tolerance "
                                         << fmt(tol.rel_max) << ") over " << errors.size() << " rows";
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult check_rows_differ(const std::string& label, int64_t rows_differ, int64_t rows,
                                             int64_t allowed, const std::string& note) {
  const std::string full = label + (note.empty() ? "" : " (" + note + ")");
  std::printf("[golden] %-60s rows %3lld  differing index sets %lld (allowed %lld)\n", full.c_str(),
              static_cast<long long>(rows), static_cast<long long>(rows_differ), static_cast<long long>(allowed));
  ::testing::Test::RecordProperty(property_key(label) + ".rows_differ", int(rows_differ));
  if (rows_differ > allowed)
    return ::testing::AssertionFailure() << full << ": " << rows_differ << " of " << rows
                                         << " rows have a different index set (allowed " << allowed << ")";
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult check_tensor(const std::string& name, const std::vector<float>& computed,
                                        const std::string& tol_name, const std::string& note) {
  const TensorInfo& info = golden().info(name);
  const std::vector<float> g = golden().f32(name);
  if (computed.size() != g.size())
    return ::testing::AssertionFailure() << name << ": computed " << computed.size() << " values, golden "
                                         << info.shape_string() << " has " << g.size();
  const int64_t cols = info.numel() / std::max<int64_t>(info.shape.at(0), 1);
  return check_errors(name, row_rel_l2(computed, g, cols), tolerance(tol_name.empty() ? name : tol_name), note);
}

// ---- GoldenPass

GoldenPass::GoldenPass(const GoldenPhase& phase)
    : ws_(golden().backend()), pass_(golden().backend(), ws_, &tracer_), seq_(golden().model().new_sequence()) {
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < phase.rows; ++i) positions.push_back(phase.first + i);
  set_rows(std::move(positions), phase.name);
}

GoldenPass::GoldenPass(std::vector<int64_t> positions, const std::string& phase_name)
    : ws_(golden().backend()), pass_(golden().backend(), ws_, &tracer_), seq_(golden().model().new_sequence()) {
  set_rows(std::move(positions), phase_name);
}

GoldenPass::GoldenPass(const GoldenPhase& phase, std::unique_ptr<SequenceCache> sequence, int64_t token_offset)
    : ws_(golden().backend()), pass_(golden().backend(), ws_, &tracer_), seq_(std::move(sequence)),
      token_offset_(token_offset) {
  DSV4_CHECK(seq_ != nullptr, "GoldenPass: no sequence cache");
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < phase.rows; ++i) positions.push_back(phase.first + i);
  set_rows(std::move(positions), phase.name);
}

void GoldenPass::set_rows(std::vector<int64_t> positions, const std::string& phase_name) {
  pass_.phase = phase_name;
  pass_.sequences = {seq_.get()};
  pass_.tokens.clear();
  pass_.sequence_of_row.clear();
  for (int64_t pos : positions) {
    pass_.tokens.push_back(golden().tokens().at(size_t(pos + token_offset_)));
    pass_.sequence_of_row.push_back(0);
  }
  pass_.positions = std::move(positions);
}

void GoldenPass::next_call(std::vector<int64_t> positions, const std::string& phase_name) {
  ws_.reset();
  tracer_.clear();
  set_rows(std::move(positions), phase_name);
}

Tensor GoldenPass::alloc(const std::vector<int64_t>& s, DType dtype) {
  switch (s.size()) {
    case 1: return ws_.alloc(dtype, {s[0]});
    case 2: return ws_.alloc(dtype, {s[0], s[1]});
    case 3: return ws_.alloc(dtype, {s[0], s[1], s[2]});
    case 4: return ws_.alloc(dtype, {s[0], s[1], s[2], s[3]});
    default: throw Error(cat("GoldenPass::alloc: ", s.size(), " dimensions"));
  }
}

Tensor GoldenPass::load(const std::vector<float>& values, const std::vector<int64_t>& shape) {
  Tensor t = alloc(shape);
  DSV4_CHECK(size_t(t.numel()) == values.size(), "GoldenPass::load: ", values.size(), " values for shape ",
             t.shape_string());
  be().from_host(t, values.data());
  return t;
}

Tensor GoldenPass::load(const std::string& name) { return load(golden().f32(name), golden().info(name).shape); }

Tensor GoldenPass::load_i32(const std::vector<int64_t>& values, const std::vector<int64_t>& shape) {
  Tensor t = alloc(shape, DType::I32);
  DSV4_CHECK(size_t(t.numel()) == values.size(), "GoldenPass::load_i32: ", values.size(), " values for shape ",
             t.shape_string());
  std::vector<int32_t> v(values.begin(), values.end());
  be().from_host(t, v.data());
  return t;
}

std::vector<float> GoldenPass::host(const Tensor& t) {
  DSV4_CHECK(t.dtype == DType::F32, "GoldenPass::host: tensor is not F32");
  std::vector<float> v(size_t(t.numel()));
  be().to_host(t, v.data());
  return v;
}

std::vector<int64_t> GoldenPass::host_i64(const Tensor& t) {
  DSV4_CHECK(t.dtype == DType::I32, "GoldenPass::host_i64: tensor is not I32");
  std::vector<int32_t> v(size_t(t.numel()));
  be().to_host(t, v.data());
  return std::vector<int64_t>(v.begin(), v.end());
}

std::vector<float> GoldenPass::traced(const std::string& name) const {
  const Tracer::Entry* e = tracer_.find(name);
  if (!e) throw Error(cat("the pass recorded no '", name, "'"));
  return e->f32;
}

// ---- golden.safetensors rows, RoPE tables

std::vector<float> output_rows(const std::string& name, int64_t begin, int64_t end) {
  const std::vector<float> all = golden().outputs_f32(name);
  const int64_t rows = golden().output_info(name).shape.at(0);
  const int64_t cols = rows > 0 ? int64_t(all.size()) / rows : 0;
  DSV4_CHECK(0 <= begin && begin <= end && end <= rows, name, ": rows [", begin, ", ", end, ") of ", rows);
  return std::vector<float>(all.begin() + begin * cols, all.begin() + end * cols);
}

std::vector<float> rope_table(const RopeSpec& spec, int64_t T) {
  const int64_t half = spec.rope_dims / 2;
  GoldenPass gp(std::vector<int64_t>{}, "prefill");
  std::vector<int64_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[size_t(t)] = t;
  std::vector<float> unit(size_t(T * 2 * half), 0.0f);
  for (size_t i = 0; i < unit.size(); i += 2) unit[i] = 1.0f;
  Tensor v = gp.load(unit, {T, 1, 2 * half});
  gp.be().rope(v, positions, spec, false);
  const std::vector<float> rotated = gp.host(v);
  gp.be().rope(v, positions, spec, true);
  const std::vector<float> back = gp.host(v);
  std::vector<float> table(rotated.size());
  for (size_t i = 0; i < rotated.size(); i += 2) {
    const double c = rotated[i], s = rotated[i + 1], norm = std::hypot(c, s);
    const double theta = std::atan2(s, c) - std::asin(std::clamp(double(back[i + 1]) / norm, -1.0, 1.0));
    table[i] = float(std::cos(theta));
    table[i + 1] = float(std::sin(theta));
  }
  return table;
}

}  // namespace dsv4::test

#include "model/weights.h"

#include "core/error.h"
#include "model/weight_walk.h"

namespace dsv4 {

namespace {

using weight_walk::code_dtypes;
using weight_walk::code_shape;
using weight_walk::scale_shape;
using weight_walk::Walk;

// Collects the bound views (present ones) of a walk over bound weights.
struct ViewCollector {
  std::vector<WeightView*> views;
  void group(const std::string&) {}
  void add(WeightView& w) {
    if (w.present()) views.push_back(&w);
  }
  void plain(WeightView& w, const std::string&, const std::vector<int64_t>&, const std::vector<DType>&) { add(w); }
  void fp8(WeightView& w, const std::string&, int64_t, int64_t) { add(w); }
  void dense(WeightView& w, const std::string&, int64_t, int64_t) { add(w); }
  void expert(WeightView& w, const std::string&, int64_t, int64_t) { add(w); }
};

// Collects the table of expected tensors.
struct TableCollector {
  const ModelConfig& c;
  std::vector<TensorSpec> specs;
  std::string current_group;

  void group(const std::string& g) { current_group = g; }
  void plain(WeightView&, const std::string& name, std::vector<int64_t> shape, std::vector<DType> dtypes) {
    specs.push_back({name, std::move(shape), std::move(dtypes), current_group});
  }
  void scaled(WeightFormat f, const std::string& p, int64_t rows, int64_t cols) {
    specs.push_back({p + ".weight", code_shape(f, rows, cols), code_dtypes(f), current_group});
    specs.push_back({p + ".scale", scale_shape(f, rows, cols), {DType::F8_E8M0}, current_group});
  }
  void fp8(WeightView&, const std::string& p, int64_t rows, int64_t cols) { scaled(WeightFormat::FP8, p, rows, cols); }
  void dense(WeightView& w, const std::string& p, int64_t rows, int64_t cols) {
    plain(w, p + ".weight", {rows, cols}, {DType::BF16, DType::F32});
  }
  void expert(WeightView& w, const std::string& p, int64_t rows, int64_t cols) {
    scaled(c.expert_dtype == "fp8" ? WeightFormat::FP8 : WeightFormat::FP4, p, rows, cols);
  }
};

}  // namespace

std::vector<TensorSpec> expected_tensors(const ModelConfig& config, bool with_mtp) {
  TableCollector collector{config, {}, {}};
  ModelWeights scratch;
  Walk<TableCollector>{collector, config}.model(scratch, with_mtp ? config.num_drafter_layers() : 0);
  return std::move(collector.specs);
}

std::vector<WeightView*> weight_views(ModelWeights& weights, const ModelConfig& config) {
  ViewCollector collector;
  const int64_t drafter = weights.dspark ? int64_t(weights.dspark->stages.size()) : int64_t(weights.mtp.size());
  Walk<ViewCollector>{collector, config}.model(weights, drafter);
  return std::move(collector.views);
}

}  // namespace dsv4

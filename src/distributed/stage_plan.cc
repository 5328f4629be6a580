// How the layers are split among the stages.
#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "distributed/mpi_stages.h"
#include "model/model_files.h"

namespace dsv4 {

std::vector<int64_t> plan_stage_layers(const ModelFiles& files, int stages, const std::vector<int64_t>& counts) {
  const ModelConfig& c = files.config;
  const int64_t L = c.num_hidden_layers;
  DSV4_CHECK(stages >= 1 && stages <= L, "--stages ", stages, ": the model has ", L, " layers (at most one stage per "
             "layer)");
  std::vector<int64_t> first{0};
  if (!counts.empty()) {
    DSV4_CHECK(int(counts.size()) == stages, "--stage-layers gives ", counts.size(), " counts for ", stages, " stages");
    for (int64_t n : counts) {
      DSV4_CHECK(n >= 1, "--stage-layers: every stage needs at least one layer, got ", n);
      first.push_back(first.back() + n);
    }
    DSV4_CHECK(first.back() == L, "--stage-layers: the counts add up to ", first.back(), " layers; the model has ", L);
    return first;
  }
  // The bytes a decode step reads per layer: all of its weights but the routed experts, of which
  // k of E; stage 0 also reads the head and the drafter once.
  const double routed_share = double(c.num_experts_per_tok) / double(std::max<int64_t>(1, c.n_routed_experts));
  std::vector<double> layer(size_t(L), 0.0);
  double stage0 = 0;
  auto* weights = const_cast<ModelWeights*>(&files.weights);
  for (const WeightView* v : weight_views(*weights, c)) {
    const std::string_view name = v->name();
    const double bytes = double(v->bytes()) * (name.find(".experts.") != std::string_view::npos ? routed_share : 1.0);
    if (name.rfind("layers.", 0) == 0) {
      const size_t dot = name.find('.', 7);
      layer[size_t(std::stoll(std::string(name.substr(7, dot - 7))))] += bytes;
    } else if (name.rfind("embed.", 0) != 0) {
      stage0 += bytes;  // (the embedding reads one row a token)
    }
  }
  // Contiguous ranges, each ending where its share of the whole (stage 0's extra included) is
  // reached, every stage keeping at least one layer.
  const double total = stage0 + std::accumulate(layer.begin(), layer.end(), 0.0);
  double done = stage0;
  for (int64_t l = 0; l < L; ++l) {
    done += layer[size_t(l)];
    const int s = int(first.size());  // the stage after the one that holds layer l so far
    const int64_t left = L - l - 1;
    if (s < stages && (done >= total * double(s) / double(stages) || left == stages - s)) first.push_back(l + 1);
  }
  first.push_back(L);
  return first;
}

}  // namespace dsv4

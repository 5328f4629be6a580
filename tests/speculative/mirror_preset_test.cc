// The `mirror` preset (checkpoint/mirror_weights.h) is what the partial-acceptance tests
// stand on, so its three promises are checked here:
// - it is built as documented: every MTP block tensor is layer 0's (byte for byte), layer
//   0's routed experts are one expert, the other layers' are not;
// - the target really depends on its context: its tokens are often not the successor f(x)
//   of the current token, and changing one earlier token changes later predictions;
// - its drafts are accepted often but not always: first-position acceptance in [0.5, 0.95],
//   many steps accept some drafts and reject the rest, and --perturb lowers acceptance.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "checkpoint/aligned_weights.h"
#include "io/safetensors.h"
#include "model/model_files.h"
#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

constexpr uint64_t kMirrorSeed = 7;  // test::mirror_checkpoint's seed

bool same_bytes(const TensorInfo& a, const TensorInfo& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.nbytes == b.nbytes && std::memcmp(a.data, b.data, a.nbytes) == 0;
}

TEST(MirrorPreset, MtpBlockIsLayerZeroAndLayerZeroHasOneExpert) {
  const TensorStore store = TensorStore::open(test::mirror_checkpoint(0.0));
  int64_t copies = 0;
  for (const TensorInfo* t : store.all()) {
    if (t->name.rfind("mtp.0.", 0) != 0) continue;
    const TensorInfo* source = store.find("layers.0." + t->name.substr(6));
    if (!source) continue;  // e_proj, h_proj, the norms, hc_head, and gate.bias (layer 0 is hash-routed)
    EXPECT_TRUE(same_bytes(*t, *source)) << t->name << " differs from " << source->name;
    ++copies;
  }
  EXPECT_GT(copies, 30) << "the MTP block's attention, hc, norms and experts are copies";
  const ModelConfig config = ModelFiles::open(test::mirror_checkpoint(0.0))->config;
  for (int64_t e = 1; e < config.n_routed_experts; ++e)
    for (const char* w : {"w1", "w2", "w3"}) {
      const std::string name = "layers.0.ffn.experts." + std::to_string(e) + "." + w + ".weight";
      EXPECT_TRUE(same_bytes(store.get(name), store.get(std::string("layers.0.ffn.experts.0.") + w + ".weight"))) << name;
    }
  EXPECT_FALSE(same_bytes(store.get("layers.1.ffn.experts.1.w1.weight"), store.get("layers.1.ffn.experts.0.w1.weight")));
}

TEST(MirrorPreset, TargetDependsOnItsContext) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), false, 0, 16});
  const ModelConfig& c = engine->config();
  const std::vector<int32_t> prompt = test::random_prompt(20, c.vocab_size, 11);
  GenerateOptions o;
  o.max_new_tokens = 400;
  const std::vector<int32_t> all = test::concat(prompt, test::generate(*engine, {prompt}, o)[0].tokens);

  // How often the greedy token is not the successor of the current token.
  const std::vector<int64_t> f = aligned_successor(c, kMirrorSeed);
  int64_t not_successor = 0;
  for (size_t t = prompt.size(); t < all.size(); ++t) not_successor += all[t] != f[size_t(all[t - 1])];
  const double share = double(not_successor) / double(all.size() - prompt.size());
  const std::set<int32_t> distinct(all.begin() + long(prompt.size()), all.end());
  std::printf("tokens that are not f(previous): %.3f; distinct tokens %zu of %zu\n", share, distinct.size(),
              all.size() - prompt.size());
  EXPECT_GT(share, 0.1) << "the target is (almost) a function of the current token";
  EXPECT_LT(share, 0.9);
  EXPECT_GT(distinct.size(), (all.size() - prompt.size()) / 3) << "the greedy run fell into a short loop";

  // Changing one token changes predictions several positions later (not only the next one).
  const test::TeacherForced base = test::teacher_forced(*engine, all);
  const int64_t V = c.vocab_size, window = c.sliding_window;
  int64_t later_changes = 0, compared = 0;
  for (int64_t m = 60; m + window < int64_t(all.size()); m += 47) {
    std::vector<int32_t> changed = all;
    changed[size_t(m)] = int32_t((changed[size_t(m)] + 1 + m) % V);
    const test::TeacherForced alt = test::teacher_forced(*engine, changed);
    for (int64_t p = m + 2; p < m + window; ++p, ++compared)
      later_changes += argmax_token({base.logits_row(0, p), size_t(V)}) != argmax_token({alt.logits_row(0, p), size_t(V)});
  }
  std::printf("predictions 2..%lld positions after a changed token that change: %lld of %lld\n",
              (long long)window, (long long)later_changes, (long long)compared);
  EXPECT_GT(later_changes, compared / 20) << "predictions do not depend on earlier tokens";
}

struct Acceptance {
  DecodeMetrics m;
  std::vector<std::vector<int32_t>> tokens;
};

Acceptance measure(double perturb, int k) {
  auto engine = Engine::open(test::mirror_checkpoint(perturb), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(5, V, 1), test::random_prompt(23, V, 2),
                                                     test::random_prompt(41, V, 3)};
  GenerateOptions o;
  o.max_new_tokens = 400;
  o.draft_tokens = k;
  Acceptance a;
  for (auto& s : test::generate(*engine, prompts, o, &a.m)) a.tokens.push_back(s.tokens);
  return a;
}

TEST(MirrorPreset, AcceptanceIsHighButPartialAndPerturbLowersIt) {
  const int k = 4;
  std::vector<double> first;
  std::vector<std::vector<int32_t>> reference;
  for (double perturb : {0.0, 0.05, 0.1}) {
    const Acceptance a = measure(perturb, k);
    const auto by_position = a.m.acceptance_by_position();
    std::printf("mirror, perturb %.2f, k=%d: acceptance by position", perturb, k);
    for (double r : by_position) std::printf(" %.3f", r);
    std::printf("; steps full %lld, partial %lld, rejected %lld (partial share %.3f); mean accepted length %.2f\n",
                (long long)a.m.full_steps, (long long)a.m.partial_steps, (long long)a.m.rejected_steps,
                a.m.partial_share(), a.m.mean_accepted_length());
    ASSERT_EQ(by_position.size(), size_t(k));
    first.push_back(by_position[0]);
    if (reference.empty()) reference = a.tokens;
    else EXPECT_EQ(a.tokens, reference) << "perturbing the MTP changed the target's output (perturb " << perturb << ")";
    if (perturb == 0.0) {
      EXPECT_GE(by_position[0], 0.5);
      EXPECT_LE(by_position[0], 0.95);
      EXPECT_GE(a.m.partial_share(), 0.2) << "too few steps accept some drafts and reject the rest";
      for (int j = 1; j < k; ++j) EXPECT_GT(a.m.accepted_at[size_t(j)], 100) << "draft position " << j + 1;
    }
  }
  EXPECT_GT(first[0], first[1]);
  EXPECT_GT(first[1], first[2]);
}

}  // namespace
}  // namespace dsv4

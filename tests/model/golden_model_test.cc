// The whole target model against the reference's outputs on the golden tiny-a checkpoint:
// teacher-forced logits and hidden streams (prefill of P tokens, then one decode call per
// token, as the reference produced them) and the greedy continuation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/model_files.h"
#include "model/transformer.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

using test::argmax;

class GoldenModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_files = ModelFiles::open(test::tiny_a_dir()).release();
    golden = new TensorStore(TensorStore::open(test::tiny_a_dir() / "golden.safetensors"));
    auto t = test::read_i64(golden->get("tokens"));
    tokens.assign(t.begin(), t.end());
    prompt_len = test::read_i64(golden->get("prompt_len"))[0];
  }
  static void TearDownTestSuite() {
    delete golden;
    delete model_files;
  }
  static ModelFiles* model_files;
  static TensorStore* golden;
  static std::vector<int32_t> tokens;
  static int64_t prompt_len;
};
ModelFiles* GoldenModelTest::model_files = nullptr;
TensorStore* GoldenModelTest::golden = nullptr;
std::vector<int32_t> GoldenModelTest::tokens;
int64_t GoldenModelTest::prompt_len = 0;


TEST_F(GoldenModelTest, TeacherForcedLogitsAndHiddenMatchTheReference) {
  const ModelConfig& c = model_files->config;
  auto backend = test::make_test_backend();
  Backend& be = *backend;
  Transformer model(c, model_files->weights, be);
  auto seq = model.new_sequence();
  const int64_t P = prompt_len, T = int64_t(tokens.size()), V = c.vocab_size;

  Transformer::Output out;
  std::vector<float> logits, hidden, prefill_all;
  Transformer::Request prefill{seq.get(), std::span<const int32_t>(tokens.data(), size_t(P)), true};
  model.forward(std::span(&prefill, 1), out);
  prefill_all = out.logits;
  logits.assign(out.logits.end() - V, out.logits.end());
  hidden = out.hidden_host();
  for (int64_t t = P; t < T; ++t) {
    Transformer::Request step{seq.get(), std::span<const int32_t>(&tokens[size_t(t)], 1), false};
    model.forward(std::span(&step, 1), out);
    logits.insert(logits.end(), out.logits.begin(), out.logits.end());
    const std::vector<float> rows = out.hidden_host();
    hidden.insert(hidden.end(), rows.begin(), rows.end());
  }

  const auto golden_logits = test::read_f32(golden->get("target.logits"));
  const auto golden_hidden = test::read_f32(golden->get("target.hidden"));
  const auto golden_prefill = test::read_f32(golden->get("target.prefill_logits_all"));
  auto check = [](const char* what, const test::ErrorSummary& e) {
    std::printf("%-28s rel-L2 per row: median %.4f  p90 %.4f  max %.4f\n", what, e.median, e.p90, e.max);
    EXPECT_LE(e.median, 0.03) << what;
    EXPECT_LE(e.p90, 0.06) << what;
    EXPECT_LE(e.max, 0.3) << what;
  };
  check("target.logits", test::summarize(test::row_rel_l2(logits, golden_logits, V)));
  check("target.hidden", test::summarize(test::row_rel_l2(hidden, golden_hidden, c.hc_mult * c.hidden_size)));
  check("target.prefill_logits_all", test::summarize(test::row_rel_l2(prefill_all, golden_prefill, V)));

  // Argmax agreement over the rows whose golden top-1/top-2 margin is at least 0.25.
  int64_t rows = 0, agree = 0;
  for (int64_t r = 0; r < T - P + 1; ++r) {
    const float* g = golden_logits.data() + r * V;
    std::vector<float> sorted(g, g + V);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    if (sorted[0] - sorted[1] < 0.25f) continue;
    ++rows;
    agree += argmax(g, V) == argmax(logits.data() + r * V, V);
  }
  const double agreement = double(agree) / double(rows);
  std::printf("argmax agreement (margin >= 0.25): %lld / %lld = %.4f\n", (long long)agree, (long long)rows, agreement);
  EXPECT_GE(agreement, 0.98);
}

TEST_F(GoldenModelTest, GreedyContinuationMatchesUpToTheFirstSmallMargin) {
  const ModelConfig& c = model_files->config;
  auto backend = test::make_test_backend();
  Backend& be = *backend;
  Transformer model(c, model_files->weights, be);
  auto seq = model.new_sequence();
  const auto golden_tokens = test::read_i64(golden->get("greedy.tokens"));
  const auto margins = test::read_f32(golden->get("greedy.margins"));
  Transformer::Output out;
  Transformer::Request prefill{seq.get(), std::span<const int32_t>(tokens.data(), size_t(prompt_len)), false};
  model.forward(std::span(&prefill, 1), out);
  size_t compared = 0;
  for (size_t i = 0; i < golden_tokens.size(); ++i) {
    if (margins[i] < 0.25f) break;  // arithmetic this close to a tie may legitimately differ
    const int32_t next = argmax(out.logits.data(), c.vocab_size);
    ASSERT_EQ(next, golden_tokens[i]) << "greedy step " << i << " (golden margin " << margins[i] << ")";
    ++compared;
    Transformer::Request step{seq.get(), std::span<const int32_t>(&next, 1), false};
    model.forward(std::span(&step, 1), out);
  }
  std::printf("greedy tokens reproduced: %zu of %zu (up to the first golden margin < 0.25)\n", compared,
              golden_tokens.size());
  EXPECT_GE(compared, 1u);
}

}  // namespace
}  // namespace dsv4

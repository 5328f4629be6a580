// The verify-length scheduler (`--draft auto`) against closed-form expectations: the acceptance
// history's counts, the cost curve's interpolation, the choice of drafts to verify against an
// exhaustive search over every combination (single sequences and batches, with costs of several
// shapes), calibration, and the decision not to draft where drafting cannot pay — with probes.
#include <gtest/gtest.h>

#include <random>

#include "speculative/verify_scheduler.h"
#include "verify_scheduler_helpers.h"

namespace dsv4 {
namespace {

using Cost = DraftProposer::Cost;
using test::measured;
using test::rate_of;

TEST(AcceptanceHistory, CountsTrialsAndHitsByPosition) {
  AcceptanceHistory h;
  h.record(3, 1);  // draft 1 accepted, draft 2 rejected, draft 3 never judged
  EXPECT_EQ(h.trials, (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(h.hits, (std::vector<int64_t>{1, 0, 0}));
  h.record(3, 3);
  h.record(2, 0);
  EXPECT_EQ(h.trials, (std::vector<int64_t>{3, 2, 1}));
  EXPECT_EQ(h.hits, (std::vector<int64_t>{2, 1, 1}));
  // Shrunk toward the prior's rate (one accepted pseudo-trial) with the weight of two trials.
  AcceptanceHistory prior;
  for (int i = 0; i < 98; ++i) prior.record(1, i < 78 ? 1 : 0);  // 78 / 98 -> (78 + 1) / (98 + 1) = 0.798
  const double p0 = 79.0 / 99.0;
  EXPECT_NEAR(h.survival(0, &prior), (2.0 + 2 * p0) / (3.0 + 2), 1e-12);
  // Neither knows position 6: the prior's deepest verified position's rate, until tried (a certain
  // chance there made 4 drafts look as likely as 1 where the first had always failed).
  EXPECT_NEAR(h.survival(5, &prior), p0, 1e-12);
  EXPECT_NEAR(h.survival(5, nullptr), 1.0, 1e-12);
  AcceptanceHistory first_failed;
  first_failed.record(4, 0);  // positions 2-4 never verified: they take position 1's (1 + 0) / (1 + 1)
  EXPECT_NEAR(AcceptanceHistory{}.survival(3, &first_failed), 0.5, 1e-12);
  EXPECT_NEAR(AcceptanceHistory{}.survival(0, &prior), p0, 1e-12);
  AcceptanceHistory failed;
  failed.record(1, 0);  // one rejection: the pseudo-trial halves the prior
  EXPECT_NEAR(AcceptanceHistory{}.survival(0, &failed), 0.5, 1e-12);
}

TEST(CostCurve, AveragesAndInterpolates) {
  CostCurve c;
  EXPECT_EQ(c.at(3), 0.0);
  c.record(1, 0.010);
  EXPECT_DOUBLE_EQ(c.at(4), 0.040);  // one point: proportional
  c.record(6, 0.020);
  EXPECT_NEAR(c.at(3), 0.014, 1e-12);  // linear between 1 and 6
  EXPECT_NEAR(c.at(8), 0.024, 1e-12);  // the last two's slope beyond
  c.record(1, 0.020);                  // the median of the recent measurements
  EXPECT_NEAR(c.at(1), 0.015, 1e-12);
  c.record(1, 0.030);
  c.record(1, 0.500);                  // an outlier (the process descheduled) moves it one rank
  EXPECT_NEAR(c.at(1), 0.025, 1e-12);
  c.record(1, 0.040);
  EXPECT_NEAR(c.at(1), 0.030, 1e-12);
  EXPECT_EQ(c.measured_points(), 2);
  // The choice's estimate: 10% less where never measured, 10% / (1 + n) after n measurements.
  EXPECT_NEAR(c.hopeful(3), 0.9 * c.at(3), 1e-12);
  EXPECT_NEAR(c.hopeful(6), (1 - 0.1 / 2) * 0.020, 1e-12);
  EXPECT_NEAR(c.hopeful(1), (1 - 0.1 / 6) * 0.030, 1e-12);
  // Only the last 15 count: the machine's speed drifts.
  for (int i = 0; i < 15; ++i) c.record(1, 0.050);
  EXPECT_NEAR(c.at(1), 0.050, 1e-12);
}

// Every combination of verify counts; the best expected rate.
double brute_force(const VerifyScheduler& s, const std::vector<std::vector<double>>& cumulative, int64_t drafted,
                   int depth, std::vector<int>& best) {
  std::vector<int> n(cumulative.size(), 0);
  double top = -1;
  for (;;) {
    const double r = s.expected_rate(cumulative, n, drafted, depth);
    if (r > top + 1e-12) {
      top = r;
      best = n;
    }
    size_t i = 0;
    while (i < n.size() && n[i] == int(cumulative[i].size())) n[i++] = 0;
    if (i == n.size()) return top;
    ++n[i];
  }
}

std::vector<double> cumulative_of(const std::vector<float>& survival) {
  std::vector<double> c;
  double p = 1;
  for (float s : survival) c.push_back(p *= s);
  return c;
}


TEST(VerifyScheduler, VerifiesThePrefixWithTheHighestExpectedRate) {
  // Pass: 10 ms + 2 ms per extra row; a block draft: 5 ms. Survivals 0.9, 0.9, 0.9, 0.1, 0.9:
  // rates 1/15, 1.9/17, 2.71/19, 3.439/21 (best: three drafts), 3.512/23, 3.578/25 per ms.
  VerifyScheduler s = measured(Cost::Once, 5, [](int64_t r) { return 0.010 + 0.002 * double(r - 1); },
                               [](int64_t) { return 0.005; });
  Draft d;
  d.tokens = {1, 2, 3, 4, 5};
  d.survival = {0.9f, 0.9f, 0.9f, 0.1f, 0.9f};
  const AcceptanceHistory h;
  const AcceptanceHistory* hs[] = {&h};
  const Draft* ds[] = {&d};
  EXPECT_EQ(s.select(hs, ds), std::vector<int>{3});
  // Confident drafts and cheap rows: all five. Unlikely drafts and dear rows: none.
  d.survival = {0.99f, 0.99f, 0.99f, 0.99f, 0.99f};
  EXPECT_EQ(s.select(hs, ds), std::vector<int>{5});
  VerifyScheduler dear = measured(Cost::Once, 5, [](int64_t r) { return 0.010 * double(r); },
                                  [](int64_t) { return 0.005; });
  d.survival = {0.3f, 0.3f, 0.3f, 0.3f, 0.3f};
  EXPECT_EQ(dear.select(hs, ds), std::vector<int>{0});
}

// The drafts made, the verification chosen is the best of every combination.
TEST(VerifyScheduler, BatchChoiceIsTheExhaustiveOptimum) {
  // Cost shapes: linear, concave (a pass of many rows reads mostly the same weights), convex
  // (each row reads experts of its own), and a step (a kernel's tile boundary).
  const std::vector<std::function<double(int64_t)>> shapes = {
      [](int64_t r) { return 0.010 + 0.003 * double(r); },
      [](int64_t r) { return 0.010 + 0.008 * std::sqrt(double(r)); },
      [](int64_t r) { return 0.010 + 0.0004 * double(r * r); },
      [](int64_t r) { return r <= 4 ? 0.012 : 0.030; },
  };
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> u(0.05f, 1.0f);
  int checked = 0, paying = 0;
  for (const auto& shape : shapes)
    for (int trial = 0; trial < 40; ++trial) {
      VerifyScheduler s = measured(Cost::Once, 5, shape, [](int64_t n) { return 0.004 * double(n); });
      const size_t m = 1 + size_t(trial % 3);
      std::vector<Draft> drafts(m);
      std::vector<std::vector<double>> cumulative;
      std::vector<AcceptanceHistory> hist(m);
      std::vector<const AcceptanceHistory*> hs;
      std::vector<const Draft*> ds;
      for (size_t i = 0; i < m; ++i) {
        const int k = 1 + int(rng() % 5);
        for (int j = 0; j < k; ++j) {
          drafts[i].tokens.push_back(j);
          drafts[i].survival.push_back(u(rng));
        }
        cumulative.push_back(cumulative_of(drafts[i].survival));
        hs.push_back(&hist[i]);
        ds.push_back(&drafts[i]);
      }
      int depth = 0;
      for (const Draft& d : drafts) depth = std::max(depth, int(d.tokens.size()));
      // The drafts are paid: the best verification maximizes tokens - λ·seconds with λ the better of
      // the best rate and plain decoding's (m sequences, m rows), by exhaustive search.
      std::vector<int> best;
      const double top = brute_force(s, cumulative, int64_t(m), depth, best);
      const double lambda = std::max(top, double(m) / s.pass_cost().hopeful(int64_t(m)));
      auto value = [&](const std::vector<int>& n) {
        const double rate = s.expected_rate(cumulative, n, int64_t(m), depth);
        double tokens = 0;
        for (size_t i = 0; i < n.size(); ++i) {
          tokens += 1;
          for (int j = 0; j < n[i]; ++j) tokens += cumulative[i][size_t(j)];
        }
        return tokens - lambda * tokens / rate;  // (seconds = tokens / rate)
      };
      double most = -1e300;
      std::vector<int> n(m, 0);
      for (;;) {  // every combination
        most = std::max(most, value(n));
        size_t i = 0;
        while (i < n.size() && n[i] == int(cumulative[i].size())) n[i++] = 0;
        if (i == n.size()) break;
        ++n[i];
      }
      const std::vector<int> chosen = s.select(hs, ds);
      EXPECT_NEAR(value(chosen), most, 1e-9) << "trial " << trial << ": below the exhaustive optimum";
      if (top >= lambda) {  // where drafting pays, that is the best rate itself
        EXPECT_NEAR(s.expected_rate(cumulative, chosen, int64_t(m), depth), top, top * 1e-9) << "trial " << trial;
        ++paying;
      }
      ++checked;
    }
  EXPECT_EQ(checked, 160);
  EXPECT_GT(paying, 20);
  EXPECT_LT(paying, 160);
}

TEST(VerifyScheduler, CalibratesThenStopsDraftingWhereItCannotPayButProbes) {
  VerifyScheduler s({5, Cost::Once, 8});
  AcceptanceHistory h;
  const AcceptanceHistory* hs[] = {&h};
  const int limit[] = {5};
  EXPECT_TRUE(s.calibrating());
  for (int warm_up = 0; warm_up < 2; ++warm_up) EXPECT_EQ(s.plan(hs, limit), std::vector<int>{0});
  EXPECT_EQ(s.plan(hs, limit), std::vector<int>{5});  // a block drafter drafts its block ...
  Draft block;
  block.tokens = {1, 2, 3, 4, 5};
  const Draft* bs[] = {&block};
  EXPECT_EQ(s.select(hs, bs), std::vector<int>{2});  // ... and the calibration verifies two
  s.record_pass(3, 0.018);
  EXPECT_EQ(s.plan(hs, limit), std::vector<int>{0});  // then a plain pass
  s.record_pass(1, 0.010);
  EXPECT_FALSE(s.calibrating());
  // Every draft so far rejected, and a draft as dear as a pass: plain decoding wins. Probes draft
  // anyway, after 8 plain steps, then 16, 32, … (doubling up to 64x), and never before the plain
  // steps since the last draft took 1/kProbeShare times a probe's cost: its draft (10 ms) and its
  // two rows (3 rows 18 ms, against 10): 18 ms <= 1.5% of n x 10 ms from n = 120 on.
  s.record_draft(1, 1, 0.010);
  for (int i = 0; i < 40; ++i) s.record_step(h, 5, 0);
  std::vector<int> probes;
  for (int step = 1; step <= 200; ++step)
    if (s.plan(hs, limit)[0] > 0) probes.push_back(step);
  EXPECT_EQ(probes, (std::vector<int>{120}));
  EXPECT_GE(s.plain_steps(), 199);
  int step = 201;
  while (s.plan(hs, limit)[0] == 0) ++step;
  EXPECT_EQ(step, 240);
  // A probe whose first draft is accepted while drafting still cannot pay (a draft as dear as a
  // pass): the probes' interval keeps doubling (past the budget's 120 steps), to 64x probe_every.
  s.record_step(h, 5, 1);
  std::vector<int> gaps;
  for (int i = 0; i < 6; ++i) {
    int gap = 1;
    while (s.plan(hs, limit)[0] == 0) ++gap;
    gaps.push_back(gap);
    s.record_step(h, 5, 0);
  }
  EXPECT_EQ(gaps, (std::vector<int>{120, 120, 128, 256, 512, 512}));
  // Drafts accepted nearly always: the whole block is asked for (a block costs the same for any K).
  AcceptanceHistory good;
  for (int i = 0; i < 200; ++i) s.record_step(good, 5, 5);
  const AcceptanceHistory* gs[] = {&good};
  EXPECT_EQ(s.plan(gs, limit), std::vector<int>{5});
}

// Where drafting would not pay even if every draft were accepted (every verification row as dear
// as a token), no probe: measuring acceptance could not change the decision. With cheaper rows,
// acceptance could: probes come, each drafting for one sequence of the batch in turn.
TEST(VerifyScheduler, NoProbesWhereEvenAcceptedDraftsCannotPay) {
  for (const bool rows_dear : {true, false}) {
    VerifyScheduler s = rows_dear ? measured(Cost::PerDraft, 4, [](int64_t r) { return 0.010 * double(r); },
                                             [](int64_t) { return 0.005; })
                                  : measured(Cost::PerDraft, 4, [](int64_t r) { return 0.010 + 0.005 * double(r - 1); },
                                             [](int64_t) { return 0.001; });
    AcceptanceHistory h;
    for (int i = 0; i < 40; ++i) s.record_step(h, 4, 0);  // every draft rejected so far
    const AcceptanceHistory* hs[] = {&h, &h, &h, &h};
    const int limit[] = {4, 4, 4, 4};
    int probes = 0;
    std::vector<int> drafting;  // the sequence each probe drafts for
    for (int step = 0; step < 200; ++step) {
      const std::vector<int> k = s.plan(hs, limit);
      if (std::all_of(k.begin(), k.end(), [](int n) { return n == 0; })) continue;
      ++probes;
      EXPECT_EQ(std::count(k.begin(), k.end(), 0), 3) << "a probe drafts for one sequence";
      drafting.push_back(int(std::find_if(k.begin(), k.end(), [](int n) { return n > 0; }) - k.begin()));
    }
    if (rows_dear) EXPECT_EQ(probes, 0) << "a probe where nothing it finds could pay";
    else EXPECT_EQ(drafting, (std::vector<int>{0, 1, 2, 3})) << "drafts accepted would pay: probes at 16, 32, 64, "
                                                                "128 (a probe's 6 ms within 1.5% of 16 steps of 25 ms), "
                                                                "one sequence each in turn";
  }
}

// A probe measures: its draft is verified even where the model expects it to fail (trimmed, a
// probe measured nothing, and a sequence whose acceptance rose later was never seen to).
TEST(VerifyScheduler, AProbeVerifiesItsDraft) {
  // (Costs at which a draft pays if accepted: a pass 10 ms + 1 ms a row, a draft 5 ms.)
  VerifyScheduler s = measured(Cost::PerDraft, 4, [](int64_t r) { return 0.010 + 0.001 * double(r - 1); },
                               [](int64_t) { return 0.005; });
  AcceptanceHistory h;
  for (int i = 0; i < 40; ++i) s.record_step(h, 4, 0);  // every draft rejected so far
  const AcceptanceHistory* hs[] = {&h};
  const int limit[] = {4};
  Draft d;
  d.tokens = {7, 8};
  const Draft* ds[] = {&d};
  EXPECT_EQ(s.select(hs, ds), std::vector<int>{0});  // outside a probe: not worth their rows
  int step = 1;
  std::vector<int> probe;
  while ((probe = s.plan(hs, limit))[0] == 0) ++step;
  // The first probe, two drafts: their 12 ms within 1.5% of 80 plain steps of 10 ms.
  EXPECT_EQ(step, 80);
  EXPECT_EQ(probe, std::vector<int>{2});
  EXPECT_EQ(s.select(hs, ds), std::vector<int>{2});  // verified, both
  EXPECT_EQ(s.plan(hs, limit), std::vector<int>{0});
  EXPECT_EQ(s.select(hs, ds), std::vector<int>{0});  // and the next plain step's rule is back
}

// A probe also computes the drafter's rows queued since its last draft (up to a window): once
// their cost is measured, probes wait until plain decoding has run long enough to pay for them.
TEST(VerifyScheduler, ProbesWaitForTheDrafterRowsTheyWillComputeToBeAffordable) {
  // A pass 10 ms + 2 ms a row, a draft 1 ms, every draft rejected. A probe costs its two drafts and
  // rows, 6 ms, plus 0.5 ms per queued drafter row (a window of 128 at most), and may cost 1.5% of the
  // plain steps before it (10 ms each).
  for (const bool rows_measured : {false, true}) {
    VerifyScheduler s({4, Cost::PerDraft, 8, /*window=*/128});
    s.record_pass(1, 0.010);
    s.record_pass(2, 0.012);
    if (rows_measured) {
      // A catch-up timed before any steady draft waits for one: the draft's share is unknown.
      s.record_catch_up(/*rows=*/20, /*sequences=*/1, /*depth=*/1, 0.001 + 20 * 0.0005);
      EXPECT_EQ(s.catch_up_row_seconds(), 0.0);
    }
    s.record_draft(1, 1, 0.001);
    EXPECT_NEAR(s.catch_up_row_seconds(), rows_measured ? 0.0005 : 0.0, 1e-12);
    AcceptanceHistory h;
    for (int i = 0; i < 40; ++i) s.record_step(h, 4, 0);
    const AcceptanceHistory* hs[] = {&h};
    const int limit[] = {4};
    int gap = 1;
    while (s.plan(hs, limit)[0] == 0) ++gap;
    // Unmeasured, the rows count as nothing: 6 ms <= 0.15 ms x n from n = 40 (past the doubling's
    // first 8). Measured, no streak up to a window pays for its rows (0.5 ms each against 0.15 ms a
    // step), and past it 6 + 64 ms <= 0.15 ms x n from n = 467.
    EXPECT_EQ(gap, rows_measured ? 467 : 40);
  }
}

TEST(VerifyScheduler, TheRestOfAStepCountsInTheRate) {
  // A pass costs 10 ms per row and drafting nothing: one draft surviving half the time yields 1.5
  // tokens in 20 ms against plain decoding's 1 in 10 ms. With 20 ms more per step for everything
  // else it yields 1.5 in 40 ms against 1 in 30: now drafting pays.
  VerifyScheduler s({1, Cost::Once, 8});
  s.record_pass(1, 0.010);
  s.record_pass(2, 0.020);
  s.record_draft(1, 1, 1e-9);
  AcceptanceHistory h;
  for (int i = 0; i < 1000; ++i) s.record_step(h, 1, i % 2);
  const AcceptanceHistory* hs[] = {&h};
  const int limit[] = {1};
  EXPECT_EQ(s.plan(hs, limit), std::vector<int>{0});
  s.record_overhead(0.020);
  const std::vector<double> half{0.5};
  // (Costs measured once enter at 95%: CostCurve::hopeful.)
  EXPECT_NEAR(s.expected_rate(std::span(&half, 1), std::vector<int>{1}, 1, 1), 1.5 / (0.95 * (0.020 + 1e-9) + 0.020),
              1e-6);
  EXPECT_EQ(s.plan(hs, limit), std::vector<int>{1});
}

TEST(VerifyScheduler, AChainDrafterPlansItsDepth) {
  // An MTP chain: each draft depth costs 4 ms, a pass 10 ms + 1 ms per row. Acceptance 0.8 per
  // position: depth d yields 1 + 0.8 + ... + 0.8^d tokens for 4d + 10 + d ms.
  VerifyScheduler s = measured(Cost::PerDraft, 6, [](int64_t r) { return 0.010 + 0.001 * double(r - 1); },
                               [](int64_t) { return 0.004; });
  AcceptanceHistory h;
  for (int i = 0; i < 400; ++i) {
    int a = 0;
    while (a < 6 && (i * 7 + a * 13) % 10 < 8) ++a;  // a deterministic stream near 0.8 per position
    s.record_step(h, 6, a);
  }
  const AcceptanceHistory* hs[] = {&h};
  const int limit[] = {6};
  const int planned = s.plan(hs, limit)[0];
  double best = 0;
  int best_depth = 0;
  for (int d = 0; d <= 6; ++d) {
    double tokens = 1, c = 1;
    for (int j = 0; j < d; ++j) tokens += (c *= h.survival(size_t(j), &s.history()));
    const double rate = tokens / (0.004 * d + 0.010 + 0.001 * d);
    if (rate > best) {
      best = rate;
      best_depth = d;
    }
  }
  EXPECT_EQ(planned, best_depth);
  EXPECT_GT(planned, 0);
}

// The two ends of the choice for a chain drafter (the MTP): drafts always accepted and a pass
// whose time does not grow with its rows (verification free) — the deepest chain, and the model
// expects it to beat plain decoding; drafts never accepted — no drafting (probes aside).
TEST(VerifyScheduler, TheLargestKWhenAcceptanceIsOneAndVerificationFreeNoneWhenNothingIsAccepted) {
  VerifyScheduler s = measured(Cost::PerDraft, 4, [](int64_t) { return 0.010; }, [](int64_t) { return 0.001; });
  AcceptanceHistory sure, never;
  for (int i = 0; i < 300; ++i) {
    s.record_step(sure, 4, 4);
    s.record_step(never, 4, 0);
  }
  const AcceptanceHistory* one[] = {&sure};
  const int limit[] = {4};
  EXPECT_EQ(s.plan(one, limit), std::vector<int>{4});
  Draft d;
  d.tokens = {1, 2, 3, 4};
  const Draft* ds[] = {&d};
  EXPECT_EQ(s.select(one, ds), std::vector<int>{4});
  EXPECT_GT(s.expectation().gain(), 3.0);  // ~5 tokens for 10 + 4 ms against 1 per 10 ms
  EXPECT_NEAR(s.expectation().accepted / double(s.expectation().steps), 4.0, 0.2);
  const AcceptanceHistory* none[] = {&never};
  int drafted = 0;
  for (int step = 0; step < 7; ++step) drafted += s.plan(none, limit)[0] > 0;
  EXPECT_EQ(drafted, 0);
}

TEST(VerifyScheduler, SecondsSavedPerTokenInClosedForm) {
  VerifyScheduler s = measured(Cost::PerDraft, 4, [](int64_t) { return 0.010; }, [](int64_t) { return 0.001; });
  EXPECT_DOUBLE_EQ(s.prompt_row_seconds(4), 0.0);
  s.record_prompt_pass(4, 0.2);
  EXPECT_DOUBLE_EQ(s.prompt_row_seconds(4), 0.05);
  AcceptanceHistory sure;
  for (int i = 0; i < 300; ++i) s.record_step(sure, 4, 4);
  const double h = 0.95;
  // One sequence: 5 tokens for 10 + 4 ms against one per 10 ms.
  EXPECT_NEAR(s.seconds_saved_per_token(1), h * 0.010 - h * 0.014 / 5, 1e-12);
  // Two: 10 tokens for 10 + 4 ms (both drafting to depth 4 in one call) against two per 10 ms.
  EXPECT_NEAR(s.seconds_saved_per_token(2), h * 0.010 / 2 - h * 0.014 / 10, 1e-12);
  VerifyScheduler never = measured(Cost::PerDraft, 4, [](int64_t) { return 0.010; }, [](int64_t) { return 0.001; });
  AcceptanceHistory none;
  for (int i = 0; i < 300; ++i) never.record_step(none, 4, 0);
  EXPECT_EQ(never.seconds_saved_per_token(1), 0.0);
}

// A prompt row's cost by the size of its pass: short prompts (a row reads the weights for a few
// rows) do not make a long prompt's rows look dear (the late-drafter decision prices a window by them).
TEST(VerifyScheduler, PromptRowsAreKeptApartByPassSize) {
  VerifyScheduler s(VerifyScheduler::Options{});
  s.record_prompt_pass(2, 0.060);     // 30 ms a row
  s.record_prompt_pass(160, 1.200);   // 7.5 ms a row
  s.record_prompt_pass(2, 0.062);
  s.record_prompt_pass(3, 0.093);
  EXPECT_DOUBLE_EQ(s.prompt_row_seconds(160), 0.0075);
  EXPECT_DOUBLE_EQ(s.prompt_row_seconds(128), 0.0075) << "the same power of two";
  EXPECT_DOUBLE_EQ(s.prompt_row_seconds(4096), 0.0075) << "the nearest size measured";
  EXPECT_NEAR(s.prompt_row_seconds(2), 0.031, 1e-12) << "the median of the 2- and 3-row passes (30, 31, 31 ms)";
}

// A confidence head that says 0.5 for drafts that are always accepted (one trained on other text,
// or one carrying no information): its survivals are scaled by what verification finds, and the
// verify length follows the evidence.
TEST(VerifyScheduler, CalibratesTheProposersSurvivalsAgainstVerification) {
  VerifyScheduler s = measured(Cost::Once, 5, [](int64_t r) { return 0.010 + 0.002 * double(r - 1); },
                               [](int64_t) { return 0.003; });
  Draft d;
  d.tokens = {1, 2, 3, 4, 5};
  d.survival = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
  AcceptanceHistory h;
  const AcceptanceHistory* hs[] = {&h};
  const Draft* ds[] = {&d};
  EXPECT_EQ(s.select(hs, ds), std::vector<int>{2});  // 1.75 tokens in 17 ms beats 1.5 in 15 and 1.875 in 19
  EXPECT_DOUBLE_EQ(s.calibration(0), 1.0);
  for (int step = 0; step < 100; ++step) s.record_step(h, 5, 5, d.survival);
  EXPECT_NEAR(s.calibration(0), 102.0 / 52.0, 1e-12);
  EXPECT_EQ(s.select(hs, ds), std::vector<int>{5});
  // The other way: confident drafts, the first accepted half the time, the others never.
  VerifyScheduler t = measured(Cost::Once, 5, [](int64_t r) { return 0.010 + 0.002 * double(r - 1); },
                               [](int64_t) { return 0.003; });
  d.survival = {0.99f, 0.99f, 0.99f, 0.99f, 0.99f};
  EXPECT_EQ(t.select(hs, ds), std::vector<int>{5});
  for (int step = 0; step < 200; ++step) t.record_step(h, 5, step % 2, d.survival);
  EXPECT_NEAR(t.calibration(0), 102.0 / (198.0 + 2.0), 1e-6);
  EXPECT_LT(t.calibration(1), 0.03);
  EXPECT_EQ(t.select(hs, ds), std::vector<int>{1});
}

}  // namespace
}  // namespace dsv4

// The verify scheduler's exploration (`--draft auto`): where the mean acceptance says not to draft,
// or to draft shallower, but the evidence is thin — drafts the optimistic bound pays for are
// verified, and a position rejected early is retried at a logarithmic pace.
#include <gtest/gtest.h>

#include "speculative/verify_scheduler.h"
#include "verify_scheduler_helpers.h"

namespace dsv4 {
namespace {

using Cost = DraftProposer::Cost;
using test::measured;
using test::rate_of;

// Plain by the mean acceptance, drafting by its optimistic bound (one standard error above): a
// sequence with few trials drafts one, to measure; the same rate over many trials decodes plainly.
// Break-even here is 0.6 (one draft: 1 + s tokens for 15 + 1 ms against one per 10 ms).
TEST(VerifyScheduler, DraftsOneWhereOnlyTheOptimisticBoundPays) {
  auto scheduler = [] {
    return measured(Cost::PerDraft, 1, [](int64_t r) { return 0.010 + 0.005 * double(r - 1); },
                    [](int64_t) { return 0.001; });
  };
  const int limit[] = {1};
  VerifyScheduler s = scheduler();
  AcceptanceHistory few;
  for (int i = 0; i < 6; ++i) s.record_step(few, 1, i % 2);  // 3 of 6
  EXPECT_LT(few.survival(0, &s.history()), 0.6);
  EXPECT_GT(few.optimistic_survival(0, &s.history()), 0.6);
  const AcceptanceHistory* f[] = {&few};
  EXPECT_EQ(s.plan(f, limit), std::vector<int>{1});
  EXPECT_EQ(s.uncertain_steps(), 1);
  Draft d;
  d.tokens = {7};
  const Draft* ds[] = {&d};
  EXPECT_EQ(s.select(f, ds), std::vector<int>{1}) << "its draft is verified: it is there to measure";
  VerifyScheduler t = scheduler();
  AcceptanceHistory many;
  for (int i = 0; i < 600; ++i) t.record_step(many, 1, i % 2);  // 300 of 600
  EXPECT_LT(many.optimistic_survival(0, &t.history()), 0.6);
  const AcceptanceHistory* m[] = {&many};
  EXPECT_EQ(t.plan(m, limit), std::vector<int>{0});
  EXPECT_EQ(t.uncertain_steps(), 0);
}

// Drafting pays at one draft, and the second position was tried once and failed (as after the
// calibration): by the mean its survival is below break-even, by its optimistic bound above, so
// the plan drafts one deeper and select() verifies it, where the mean alone would verify one
// draft forever. Trials there close the bound: the same rate over many decodes one draft.
// (Pass 10 ms + 2 ms a row, 1 ms a draft: with s1 ~ 0.9 the second draft pays from s2 ~ 0.5.)
TEST(VerifyScheduler, VerifiesOneDeeperWhereOnlyTheOptimisticBoundPaysTheNextPosition) {
  auto scheduler = [] {
    return measured(Cost::PerDraft, 2, [](int64_t r) { return 0.010 + 0.002 * double(r - 1); },
                    [](int64_t) { return 0.001; });
  };
  const int limit[] = {2};
  // The rates of verifying 1 and 2 drafts, by the mean and by the optimistic survivals.
  auto rates = [](const VerifyScheduler& s, const AcceptanceHistory& h, bool optimistic) {
    return std::pair{rate_of(s, h, 1, optimistic), rate_of(s, h, 2, optimistic)};
  };
  VerifyScheduler s = scheduler();
  AcceptanceHistory once;
  for (int i = 0; i < 40; ++i) s.record_step(once, 1, i % 10 != 0);  // 36 of 40 at position 1
  s.record_step(once, 2, 1);                                        // position 2: one failure
  const auto [mean1, mean2] = rates(s, once, false);
  const auto [hope1, hope2] = rates(s, once, true);
  ASSERT_GT(mean1, mean2) << "by the mean, one draft pays best";
  ASSERT_LT(hope1, hope2) << "by the optimistic bound, two";
  const AcceptanceHistory* o[] = {&once};
  EXPECT_EQ(s.plan(o, limit), std::vector<int>{2});
  EXPECT_EQ(s.uncertain_steps(), 1);
  Draft d;
  d.tokens = {7, 8};
  const Draft* ds[] = {&d};
  EXPECT_EQ(s.select(o, ds), std::vector<int>{2}) << "the deeper draft is verified: it is there to measure";
  // The same rates over many trials: the bound is at the mean, one draft, no exploration.
  VerifyScheduler t = scheduler();
  AcceptanceHistory many;
  for (int i = 0; i < 300; ++i) t.record_step(many, 2, i % 3 == 0 ? 2 : 1);  // position 2: 1 of 3
  for (int i = 0; i < 33; ++i) t.record_step(many, 1, 0);                     // position 1: 300 of 333
  const auto [many_hope1, many_hope2] = rates(t, many, true);
  ASSERT_GT(many_hope1, many_hope2);
  const AcceptanceHistory* m[] = {&many};
  EXPECT_EQ(t.plan(m, limit), std::vector<int>{1});
  EXPECT_EQ(t.uncertain_steps(), 0);
  const Draft* dm[] = {&d};
  d.tokens = {7};
  EXPECT_EQ(t.select(m, dm), std::vector<int>{1});
}

// Plain by the mean at every depth, and the doubt is at the second position, not the first: one
// draft loses (its verification row is dear) whatever its well-measured 0.9, two would pay if the
// second position, tried once and failed, is as good as its optimistic bound. The step drafts and
// verifies two (one would measure nothing new: auto verified one draft for 130 steps so), and
// trials there close the bound: at a true 0.25 the same history decodes plainly.
// (Pass 10 ms, 18.5 ms for 2 rows, 21 ms for 3; a draft 1 ms.)
TEST(VerifyScheduler, MeasuresTheDeeperPositionInDoubtWhereOneDraftCannotPay) {
  auto scheduler = [] {
    return measured(Cost::PerDraft, 2,
                    [](int64_t r) { return r == 1 ? 0.010 : r == 2 ? 0.0185 : 0.021 + 0.001 * double(r - 3); },
                    [](int64_t) { return 0.001; });
  };
  const int limit[] = {2};
  VerifyScheduler s = scheduler();
  AcceptanceHistory h;
  for (int i = 0; i < 60; ++i) s.record_step(h, 1, i % 10 != 0);  // 54 of 60 at position 1
  s.record_step(h, 2, 1);                                          // position 2: one failure
  ASSERT_LT(rate_of(s, h, 1, false), rate_of(s, h, 0, false)) << "one draft loses by the mean";
  ASSERT_LT(rate_of(s, h, 1, true), rate_of(s, h, 0, false)) << "and by its bound";
  ASSERT_LT(rate_of(s, h, 2, false), rate_of(s, h, 0, false)) << "two lose by the mean";
  ASSERT_GT(rate_of(s, h, 2, true), rate_of(s, h, 0, false)) << "two pay by the bound";
  const AcceptanceHistory* hs[] = {&h};
  EXPECT_EQ(s.plan(hs, limit), std::vector<int>{2});
  EXPECT_EQ(s.uncertain_steps(), 1);
  Draft d;
  d.tokens = {7, 8};
  const Draft* ds[] = {&d};
  EXPECT_EQ(s.select(hs, ds), std::vector<int>{2}) << "both verified: the second is the measurement";
  for (int i = 0; i < 40; ++i) s.record_step(h, 2, i % 10 == 0 ? 0 : i % 4 == 0 ? 2 : 1);  // position 2 ~ 0.25
  ASSERT_LT(rate_of(s, h, 2, true), rate_of(s, h, 0, false));
  EXPECT_FALSE(s.plan(hs, limit)[0] > 0) << "measured, the doubt is gone: plain (probes aside)";
}

// What drafting saves a batch per token, in closed form: acceptance 1, a pass of 10 ms whatever
// its rows, a draft depth of 1 ms; every cost measured once, so taken 5% cheaper (CostCurve::hopeful).
// Drafting pays at one draft, and two would pay more were the second accepted, but it was rejected
// twice early on: by its mean and its bound two lose, and only a further trial can show otherwise
// (mirror-v4-flash's first steps, where position 2 later passes 85% of the time). It is tried again
// whenever its trials fall to log2 of position 1's: at 5, 8, 16, 32, 64 and 128 trials there, while
// it keeps failing. Where two drafts could not pay even if accepted, never.
TEST(VerifyScheduler, RetriesAPositionRejectedEarlyAtALogarithmicPace) {
  for (const bool three_rows_dear : {false, true}) {
    VerifyScheduler s = measured(Cost::PerDraft, 2,
                                 [&](int64_t r) { return r == 1 ? 0.010 : r == 2 ? 0.014 : three_rows_dear ? 0.040 : 0.015; },
                                 [](int64_t) { return 0.002; });
    AcceptanceHistory h;
    for (int i = 0; i < 3; ++i) s.record_step(h, 1, 1);
    s.record_step(h, 2, 1);
    s.record_step(h, 2, 1);  // position 2: two failures
    ASSERT_GT(rate_of(s, h, 1, false), rate_of(s, h, 0, false)) << "one draft pays";
    ASSERT_LT(rate_of(s, h, 2, true), rate_of(s, h, 1, false)) << "two lose by the bound";
    const AcceptanceHistory* hs[] = {&h};
    const int limit[] = {2};
    std::vector<int64_t> at;  // position 1's trials when position 2 was tried again
    for (int step = 0; step < 200; ++step) {
      const std::vector<int> k = s.plan(hs, limit);
      ASSERT_GE(k[0], 1);
      if (k[0] == 2) at.push_back(h.trials[0]);
      s.record_step(h, k[0], 1);  // position 1 passes, position 2 fails
    }
    if (three_rows_dear) EXPECT_TRUE(at.empty()) << "two drafts cannot pay even if accepted";
    else EXPECT_EQ(at, (std::vector<int64_t>{5, 8, 16, 32, 64, 128}));
    EXPECT_EQ(s.uncertain_steps(), int64_t(at.size()));
  }
}

}  // namespace
}  // namespace dsv4

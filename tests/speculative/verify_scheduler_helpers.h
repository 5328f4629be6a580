// Helpers shared by the verify scheduler's tests.
#pragma once
#include <functional>
#include <vector>

#include "speculative/verify_scheduler.h"

namespace dsv4::test {

// A scheduler whose pass costs follow `pass(rows)` (seconds) for rows 1..40 and whose draft costs
// `draft(sequences)`, all measured.
inline VerifyScheduler measured(DraftProposer::Cost cost, int max_drafts, const std::function<double(int64_t)>& pass,
                         const std::function<double(int64_t)>& draft) {
  VerifyScheduler s({max_drafts, cost, 8});
  for (int64_t r = 1; r <= 40; ++r) s.record_pass(r, pass(r));
  for (int64_t n = 1; n <= 8; ++n) s.record_draft(n, 1, draft(n));
  return s;
}

// The expected rate of verifying k drafts of one sequence (drafted to depth k), by its mean or its
// optimistic survivals.
inline double rate_of(const VerifyScheduler& s, const AcceptanceHistory& h, int k, bool optimistic) {
  std::vector<std::vector<double>> c(1);
  double cum = 1.0;
  for (size_t j = 0; j < size_t(k); ++j)
    c[0].push_back(cum *= optimistic ? h.optimistic_survival(j, &s.history()) : h.survival(j, &s.history()));
  const int n[] = {k};
  return s.expected_rate(c, n, k > 0 ? 1 : 0, k);
}

}  // namespace dsv4::test

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/thread_pool.h"

namespace dsv4 {
namespace {

// A per-index computation whose result must not depend on how the work is split.
std::vector<double> compute(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<double> out(size_t(n), -1.0);
  pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int worker) {
    EXPECT_GE(worker, 0);
    EXPECT_LT(worker, pool.size());
    for (int64_t i = b; i < e; ++i) out[size_t(i)] = std::sin(double(i)) * double(i % 17);
  });
  return out;
}

TEST(ThreadPool, ResultsIndependentOfThreadCount) {
  ThreadPool one(1);
  const std::vector<double> expect = compute(one, 10007, 1);
  for (int threads : {1, 2, 3, 4, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t grain : {1, 7, 64, 100000}) EXPECT_EQ(compute(pool, 10007, grain), expect) << threads;
  }
}

TEST(ThreadPool, EveryTaskRunsExactlyOnceForAnySize) {
  ThreadPool pool(4);
  for (int64_t n : {0, 1, 2, 3, 4, 5, 7, 8, 9, 31, 100, 1000, 4097}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    for (auto& h : hits) h = 0;
    pool.run(n, [&](int64_t t, int worker) {
      EXPECT_LT(worker, pool.size());
      hits[size_t(t)].fetch_add(1);
    });
    for (int64_t t = 0; t < n; ++t) ASSERT_EQ(hits[size_t(t)].load(), 1) << "n " << n << " task " << t;
    // parallel_for covers [0, n) exactly once too.
    std::vector<int> covered(static_cast<size_t>(n), 0);
    pool.parallel_for(n, 3, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) covered[size_t(i)] += 1;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(covered[size_t(i)], 1) << "n " << n << " index " << i;
  }
}

TEST(ThreadPool, AnExceptionInATaskReachesTheCaller) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int64_t bad : {0, 5, 99}) {
      std::atomic<int64_t> ran{0};
      try {
        pool.run(100, [&](int64_t t, int) {
          ran.fetch_add(1);
          if (t == bad) throw std::runtime_error("task " + std::to_string(t) + " failed");
        });
        ADD_FAILURE() << "run() returned normally although task " << bad << " threw";
      } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()), "task " + std::to_string(bad) + " failed");
      }
      EXPECT_GE(ran.load(), 1);
      // The pool keeps working after an error.
      std::atomic<int64_t> sum{0};
      pool.run(50, [&](int64_t t, int) { sum.fetch_add(t); });
      EXPECT_EQ(sum.load(), 49 * 50 / 2) << threads << " threads";
    }
  }
}

TEST(ThreadPool, ManySmallJobsBackToBack) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  int64_t expect = 0;
  for (int job = 0; job < 20000; ++job) {
    const int64_t n = 1 + job % 5;
    pool.run(n, [&](int64_t t, int) { sum.fetch_add(t + 1); });
    expect += n * (n + 1) / 2;
  }
  EXPECT_EQ(sum.load(), expect);
}

TEST(ThreadPool, PoolsOfDifferentSizesCoexist) {
  ThreadPool a(2), b(3);
  std::vector<double> ra, rb;
  ra = compute(a, 5000, 10);
  rb = compute(b, 5000, 10);
  EXPECT_EQ(ra, rb);
}

}  // namespace
}  // namespace dsv4

#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <immintrin.h>

namespace dsv4 {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  num_threads_ = num_threads;
  for (int w = 1; w < num_threads_; ++w) threads_.emplace_back([this, w] { worker_loop(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::work(int worker) {
  for (;;) {
    int64_t t = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (t >= num_tasks_) break;
    try {
      (*task_)(t, worker);
    } catch (...) {
      // An error inside a loop body (e.g. a cache row that is not there) must reach the
      // caller of run() as an exception, not terminate the process from a worker thread.
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
      next_task_.store(num_tasks_, std::memory_order_relaxed);  // hand out no more tasks
    }
  }
}

void ThreadPool::run(int64_t num_tasks, Task fn) {
  if (num_tasks <= 0) return;
  if (num_threads_ == 1 || num_tasks == 1) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  task_ = &fn;
  num_tasks_ = num_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  busy_workers_.store(num_threads_ - 1, std::memory_order_relaxed);
  // seq_cst: a worker that registers as a sleeper either sees this generation before it waits,
  // or is counted below and woken under the lock.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_.notify_all();
  }
  work(0);
  // Yield now and then: with more threads than free cores (a busy machine), a worker that
  // still has to check in needs this core, and pure spinning would wait a whole time slice.
  for (int spin = 0; busy_workers_.load(std::memory_order_acquire) != 0; ++spin) {
    if ((spin & 255) == 255) std::this_thread::yield();
    else _mm_pause();
  }
  if (error_) {
    std::exception_ptr e;
    std::swap(e, error_);
    std::rethrow_exception(e);
  }
}

void ThreadPool::worker_loop(int worker) {
  using Clock = std::chrono::steady_clock;
  uint64_t seen = 0;
  for (;;) {
    // Spin for a bounded time: the next job of a decode step usually follows within microseconds.
    uint64_t gen = generation_.load(std::memory_order_acquire);
    if (gen == seen) {
      const auto until = Clock::now() + std::chrono::microseconds(kSpinMicroseconds);
      for (int spin = 1; gen == seen; ++spin) {
        _mm_pause();
        gen = generation_.load(std::memory_order_acquire);
        if ((spin & 1023) == 0 && gen == seen) {
          if (Clock::now() > until) break;
          std::this_thread::yield();  // see run()
        }
      }
    }
    if (gen == seen) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_seq_cst) != seen; });
        gen = generation_.load();
      }
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = gen;
    if (stop_.load()) return;
    work(worker);
    busy_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace dsv4

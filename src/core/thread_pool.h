// A persistent pool of worker threads for data-parallel loops.
//
// run(n, fn) calls fn(task, worker) for task = 0..n-1, spread over the workers and the
// calling thread, and returns when all calls are done. If a call throws, no further tasks
// start and run() rethrows the first exception on the calling thread. Tasks are handed out dynamically;
// callers keep results independent of which worker ran a task (each task writes its own
// outputs), so results never depend on the thread count.
//
// Between jobs a worker spins for a short, bounded time (decode steps issue many loops a few
// microseconds apart, and waking a sleeping thread costs more than that), then sleeps on a
// condition variable. A job wakes sleepers only when there are any, so the common case — all
// workers spinning — takes no lock and no system call. Callers run small loops inline
// (run with one task does), so a model too small to profit leaves the workers asleep.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <type_traits>
#include <mutex>
#include <thread>
#include <vector>

namespace dsv4 {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads = 0);  // 0 = hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }

  // A non-owning reference to the loop body (no allocation per job, unlike std::function);
  // the callable must outlive the run() call, as a lambda argument does.
  class Task {
   public:
    template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Task>>>
    Task(F&& fn)  // NOLINT: implicit, so that run() takes lambdas
        : object_(const_cast<void*>(static_cast<const void*>(&fn))),
          call_([](void* o, int64_t t, int w) { (*static_cast<std::remove_reference_t<F>*>(o))(t, w); }) {}
    void operator()(int64_t task, int worker) const { call_(object_, task, worker); }

   private:
    void* object_;
    void (*call_)(void*, int64_t, int);
  };
  void run(int64_t num_tasks, Task fn);

  // Splits [0, n) into chunks of at least `grain` items: fn(begin, end, worker).
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(n / std::max<int64_t>(grain, 1),
                                                            int64_t(num_threads_) * 4));
    if (chunks == 1) { fn(int64_t(0), n, 0); return; }
    const int64_t step = (n + chunks - 1) / chunks;
    chunks = (n + step - 1) / step;
    run(chunks, [&](int64_t c, int worker) {
      int64_t b = c * step, e = std::min(n, b + step);
      fn(b, e, worker);
    });
  }

  // How long an idle worker spins before it sleeps.
  static constexpr int kSpinMicroseconds = 100;

 private:
  void worker_loop(int worker);
  void work(int worker);

  int num_threads_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> busy_workers_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  int64_t num_tasks_ = 0;
  const Task* task_ = nullptr;
  std::mutex error_mutex_;
  std::exception_ptr error_;  // the first exception a task threw in the running job
};

}  // namespace dsv4

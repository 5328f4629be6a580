// Opt-in wall-time accounting of the CPU backend's ops (DSV4_PROFILE_OPS=1 in the environment):
// per op name, total time and calls, printed to stderr when the backend is destroyed. Off,
// each op pays one well-predicted branch. Ops given their row count are also split by it (1,
// 2-4, 5-16, 17-64, 65+ rows): a decode step, a verification and a prefill chunk differ.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace dsv4 {

class OpProfile {
 public:
  ~OpProfile();
  void add(const char* op, double us, int64_t rows = -1);
  void clear() { ops_.clear(); }
  // Enabled by DSV4_PROFILE_OPS (null otherwise).
  static std::unique_ptr<OpProfile> from_environment();

 private:
  struct Entry {
    double us = 0;
    int64_t calls = 0;
  };
  std::map<std::string, Entry> ops_;
};

class ScopedOp {
 public:
  ScopedOp(OpProfile* profile, const char* op, int64_t rows = -1) : profile_(profile), op_(op), rows_(rows) {
    if (profile_) t0_ = std::chrono::steady_clock::now();
  }
  ~ScopedOp() {
    if (profile_)
      profile_->add(op_, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count(),
                    rows_);
  }
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;

 private:
  OpProfile* profile_;
  const char* op_;
  int64_t rows_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace dsv4

// Opt-in wall-time accounting of the CPU backend's ops (DSV4_PROFILE_OPS=1 in the environment):
// per op name, total time and calls, printed to stderr when the backend is destroyed. Off,
// each op pays one well-predicted branch.
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
  void add(const char* op, double us);
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
  ScopedOp(OpProfile* profile, const char* op) : profile_(profile), op_(op) {
    if (profile_) t0_ = std::chrono::steady_clock::now();
  }
  ~ScopedOp() {
    if (profile_)
      profile_->add(op_, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count());
  }
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;

 private:
  OpProfile* profile_;
  const char* op_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace dsv4

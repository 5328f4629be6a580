// A progress line on standard error for the long waits of a command: opening a checkpoint
// (hundreds of GB read or copied: minutes), a long prompt's prefill (a 128k-token prompt takes
// far longer on a CPU). Drawn only on a terminal and without --quiet, so that a pipe or a log
// file gets nothing; rewritten in place at most ten times a second, with the rate and the time
// left; a phase that was drawn ends with a line saying how long it took. A phase finished at its
// first report (a short prompt: one chunk) draws nothing.
#pragma once
#include <chrono>
#include <string>
#include <string_view>

#include "core/progress.h"

namespace dsv4 {
class SpeculativeDecoder;
}

namespace dsv4::cli {

class ProgressMeter {
 public:
  explicit ProgressMeter(bool quiet);
  bool enabled() const { return enabled_; }
  ProgressFn opening();                       // Engine::open's phases (bytes)
  void watch_prefill(SpeculativeDecoder& d);  // prompt tokens processed of the prompts'

  enum class Unit { Bytes, Tokens };
  void report(std::string_view phase, int64_t done, int64_t total, Unit unit);

 private:
  using Clock = std::chrono::steady_clock;
  void draw(const std::string& line, bool last);
  bool enabled_ = false, drawn_ = false;
  std::string phase_;
  Clock::time_point start_, last_draw_;
};

}  // namespace dsv4::cli

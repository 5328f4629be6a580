#include "progress_meter.h"

#include <unistd.h>

#include <cstdio>

#include "core/error.h"
#include "speculative/speculative_decoder.h"

namespace dsv4::cli {

namespace {

std::string amount(double x, ProgressMeter::Unit unit) {
  char buf[64];
  if (unit == ProgressMeter::Unit::Bytes) std::snprintf(buf, sizeof buf, "%.1f GB", x / 1e9);
  else std::snprintf(buf, sizeof buf, "%lld tokens", (long long)x);
  return buf;
}

std::string rate(double per_second, ProgressMeter::Unit unit) {
  char buf[64];
  if (unit == ProgressMeter::Unit::Bytes) std::snprintf(buf, sizeof buf, "%.2f GB/s", per_second / 1e9);
  else std::snprintf(buf, sizeof buf, "%.1f tokens/s", per_second);
  return buf;
}

std::string duration(double seconds) {
  char buf[32];
  const int64_t s = int64_t(seconds + 0.5);
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(s / 3600), (long long)(s / 60 % 60));
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  else std::snprintf(buf, sizeof buf, "%.1f s", seconds);
  return buf;
}

}  // namespace

ProgressMeter::ProgressMeter(bool quiet) : enabled_(!quiet && ::isatty(STDERR_FILENO)) {}

ProgressFn ProgressMeter::opening() {
  if (!enabled_) return {};
  return [this](std::string_view phase, int64_t done, int64_t total) {
    // (The head copies report 0 / 1, 1 / 1: a step without bytes.)
    report(phase, done, total, total > 1 ? Unit::Bytes : Unit::Tokens);
  };
}

void ProgressMeter::watch_prefill(SpeculativeDecoder& d) {
  if (!enabled_) return;
  d.set_prefill_progress([this](int64_t done, int64_t total) { report("prefill", done, total, Unit::Tokens); });
}

void ProgressMeter::report(std::string_view phase, int64_t done, int64_t total, Unit unit) {
  if (!enabled_) return;
  const Clock::time_point now = Clock::now();
  if (phase != phase_) {  // a new phase (the previous one, if drawn, has ended its line)
    phase_ = std::string(phase);
    start_ = now;
    drawn_ = false;
  }
  const bool last = done >= total;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (total <= 1) {  // a step without units (a head copy): one line when it ends, if it took a while
    if (last && elapsed >= 0.5) draw(cat(phase_, ": done in ", duration(elapsed)), true);
    return;
  }
  if (done == 0 && !drawn_) return;  // its start: the clock runs from here
  if (last && !drawn_) return;  // finished at its first report (a one-chunk prompt): nothing to show
  if (!last && drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  std::string line = cat(phase_, ": ");
  if (last) {
    line += cat(amount(double(total), unit), " in ", duration(elapsed));
    if (elapsed > 0) line += cat(" (", rate(double(total) / elapsed, unit), ")");
  } else {
    line += cat(amount(double(done), unit), " of ", amount(double(total), unit));
    if (elapsed > 1.0 && done * 50 > total) {  // (a rate from the first instants misleads)
      const double per_second = double(done) / elapsed;
      line += cat(", ", rate(per_second, unit), ", ", duration(double(total - done) / per_second), " left");
    }
  }
  draw(line, last);
}

void ProgressMeter::draw(const std::string& line, bool last) {
  std::fprintf(stderr, "\r\033[K  %s%s", line.c_str(), last ? "\n" : "");
  std::fflush(stderr);
  drawn_ = !last;
  if (last) phase_.clear();
  last_draw_ = Clock::now();
}

}  // namespace dsv4::cli

// Shared helpers of the engine tests: paths, golden tensors, error metrics, running the CLI.
#pragma once
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/backends.h"
#include "io/safetensors.h"

namespace dsv4::test {

// Index of the largest of v[0..n) (the first, on ties).
inline int64_t argmax(const float* v, int64_t n) { return int64_t(std::max_element(v, v + n) - v); }

// The backend the engine tests run on: DSV4_TEST_BACKEND (cpu | reference; default cpu), with
// 2 threads. CTest runs the model and speculative suites once per backend (tests/CMakeLists.txt).
BackendOptions test_backend();
std::unique_ptr<Backend> make_test_backend();

std::filesystem::path data_path(const std::string& relative);  // under tests/data
std::filesystem::path tiny_a_dir();                               // tests/data/tiny-a
// A fresh, empty scratch directory for one test (under the build tree).
std::filesystem::path scratch_dir(const std::string& name);

// Reads any float/int tensor as f32 / i64 values.
std::vector<float> read_f32(const TensorInfo& t);
std::vector<int64_t> read_i64(const TensorInfo& t);

// Per-row relative L2 error ||c - g|| / ||g|| over rows of `cols` values; rows whose golden
// norm is zero are divided by the rms of all golden row norms instead (as the golden README).
std::vector<double> row_rel_l2(const std::vector<float>& computed, const std::vector<float>& golden,
                               int64_t cols);
struct ErrorSummary {
  double median = 0, p90 = 0, max = 0;
  size_t nonfinite = 0;  // NaN / infinite rows: they count as +infinity, so max (and any bound on it) fails
};
ErrorSummary summarize(std::vector<double> errors);

struct CommandOutput {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};
// Runs the built dsv4 binary with the given argument string (shell syntax).
CommandOutput run_cli(const std::string& args);
CommandOutput run_shell(const std::string& command);

// Bytes of this process's mapping that starts at `start` held in its page tables (Rss in
// /proc/self/smaps); -1 if no mapping starts there.
int64_t mapped_resident_bytes(const void* start);

}  // namespace dsv4::test

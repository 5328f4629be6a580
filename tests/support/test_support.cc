#include "support/test_support.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <sys/wait.h>

#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4::test {

namespace fs = std::filesystem;

BackendOptions test_backend() {
  const char* kind = std::getenv("DSV4_TEST_BACKEND");
  return {kind && *kind ? parse_backend_kind(kind) : BackendKind::Cpu, 2};
}

std::unique_ptr<Backend> make_test_backend() { return make_backend(test_backend()); }

fs::path data_path(const std::string& relative) { return fs::path(DSV4_TEST_DATA) / relative; }
fs::path tiny_a_dir() { return data_path("tiny-a"); }

fs::path scratch_dir(const std::string& name) {
  fs::path p = fs::path(DSV4_TEST_TMP) / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::vector<float> read_f32(const TensorInfo& t) {
  std::vector<float> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype) {
      case DType::F32: std::memcpy(&v[i], t.data + 4 * i, 4); break;
      case DType::BF16: { uint16_t h; std::memcpy(&h, t.data + 2 * i, 2); v[i] = bf16_to_f32(h); break; }
      case DType::F16: { uint16_t h; std::memcpy(&h, t.data + 2 * i, 2); v[i] = f16_to_f32(h); break; }
      case DType::F64: { double d; std::memcpy(&d, t.data + 8 * i, 8); v[i] = float(d); break; }
      default: throw Error(cat("read_f32: tensor '", t.name, "' is ", dtype_name(t.dtype)));
    }
  }
  return v;
}

std::vector<int64_t> read_i64(const TensorInfo& t) {
  std::vector<int64_t> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype) {
      case DType::I64: std::memcpy(&v[i], t.data + 8 * i, 8); break;
      case DType::I32: { int32_t x; std::memcpy(&x, t.data + 4 * i, 4); v[i] = x; break; }
      default: throw Error(cat("read_i64: tensor '", t.name, "' is ", dtype_name(t.dtype)));
    }
  }
  return v;
}

std::vector<double> row_rel_l2(const std::vector<float>& c, const std::vector<float>& g, int64_t cols) {
  if (c.size() != g.size()) throw Error(cat("row_rel_l2: sizes differ: ", c.size(), " vs ", g.size()));
  const size_t rows = g.size() / size_t(cols);
  std::vector<double> diff(rows), norm(rows);
  double norm_sq_sum = 0;
  for (size_t r = 0; r < rows; ++r) {
    double d = 0, n = 0;
    for (int64_t k = 0; k < cols; ++k) {
      double gv = g[r * size_t(cols) + size_t(k)], cv = c[r * size_t(cols) + size_t(k)];
      d += (cv - gv) * (cv - gv);
      n += gv * gv;
    }
    diff[r] = std::sqrt(d);
    norm[r] = std::sqrt(n);
    norm_sq_sum += n;
  }
  const double rms_norm = std::sqrt(norm_sq_sum / double(std::max<size_t>(rows, 1)));
  std::vector<double> e(rows);
  for (size_t r = 0; r < rows; ++r) {
    double denom = norm[r] > 0 ? norm[r] : rms_norm;
    e[r] = denom > 0 ? diff[r] / denom : diff[r];
  }
  return e;
}

ErrorSummary summarize(std::vector<double> e) {
  ErrorSummary s;
  if (e.empty()) return s;
  // A NaN would sort anywhere (and could hide below the median): it is an infinite error.
  for (double& v : e)
    if (!std::isfinite(v)) {
      v = std::numeric_limits<double>::infinity();
      ++s.nonfinite;
    }
  std::sort(e.begin(), e.end());
  auto at = [&](double q) {  // linear interpolation, as numpy's percentile
    double pos = q * double(e.size() - 1);
    size_t lo = size_t(std::floor(pos)), hi = std::min(e.size() - 1, lo + 1);
    return e[lo] + (e[hi] - e[lo]) * (pos - double(lo));
  };
  s.median = at(0.5);
  s.p90 = at(0.9);
  s.max = e.back();
  return s;
}

CommandOutput run_shell(const std::string& command) {
  CommandOutput result;
  std::string full = command + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (!p) return result;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) result.out.append(buf.data(), n);
  int status = pclose(p);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  return result;
}

CommandOutput run_cli(const std::string& args) { return run_shell(std::string(DSV4_CLI) + " " + args); }

int64_t mapped_resident_bytes(const void* start) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_mapping = false;
  while (std::getline(smaps, line)) {
    unsigned long long from = 0, to = 0;
    char dash = 0;
    std::istringstream header(line);
    if (header >> std::hex >> from >> dash >> to && dash == '-') {  // "from-to perms offset dev inode path"
      in_mapping = from == reinterpret_cast<uintptr_t>(start);
      continue;
    }
    long long kib = 0;
    if (in_mapping && std::sscanf(line.c_str(), "Rss: %lld kB", &kib) == 1) return kib * 1024;
  }
  return -1;
}

}  // namespace dsv4::test

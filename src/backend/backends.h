// The backends of this build, and the one place that constructs them: everything that runs
// a model (the engine, the tests, the benchmarks) asks make_backend() for one by kind.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"

namespace dsv4 {

enum class BackendKind : uint8_t {
  Cpu,        // multithreaded SIMD kernels, chosen at run time for this machine
  Reference,  // plain scalar code, one function per op: the math, written to be read
};

struct BackendOptions {
  BackendKind kind = BackendKind::Cpu;
  int threads = 0;  // the CPU backend's threads (0 = all cores); others ignore it
  // The CPU backend copies the weights into its own memory on huge pages at prepare() instead of
  // reading the mapped checkpoint in place (cpu_weights.cc); others ignore it.
  bool weights_in_memory = false;
};

const char* backend_kind_name(BackendKind kind);
// "cpu" | "reference"; throws Error naming the choices otherwise.
BackendKind parse_backend_kind(std::string_view name);
// The kinds that can run on this machine, the default first.
std::vector<BackendKind> available_backends();
std::string available_backend_names();  // "cpu|reference"

std::unique_ptr<Backend> make_backend(const BackendOptions& options = {});

}  // namespace dsv4

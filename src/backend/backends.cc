#include "backend/backends.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/reference/reference_backend.h"
#include "core/error.h"

namespace dsv4 {

const char* backend_kind_name(BackendKind kind) {
  switch (kind) {
    case BackendKind::Cpu: return "cpu";
    case BackendKind::Reference: return "reference";
  }
  return "?";
}

std::vector<BackendKind> available_backends() { return {BackendKind::Cpu, BackendKind::Reference}; }

std::string available_backend_names() {
  std::string names;
  for (BackendKind k : available_backends()) names += (names.empty() ? "" : "|") + std::string(backend_kind_name(k));
  return names;
}

BackendKind parse_backend_kind(std::string_view name) {
  for (BackendKind k : available_backends())
    if (name == backend_kind_name(k)) return k;
  throw Error(cat("unknown backend '", name, "' (choose ", available_backend_names(), ")"));
}

std::unique_ptr<Backend> make_backend(const BackendOptions& options) {
  switch (options.kind) {
    case BackendKind::Cpu: {
      auto cpu = std::make_unique<CpuBackend>(options.threads);
      cpu->set_weights_in_memory(options.weights_in_memory);
      return cpu;
    }
    case BackendKind::Reference: return std::make_unique<ReferenceBackend>();
  }
  throw Error(cat("make_backend: unknown backend kind ", int(options.kind)));
}

}  // namespace dsv4

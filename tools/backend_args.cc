#include "backend_args.h"

#include <map>

namespace dsv4::cli {

void add_backend_options(CLI::App* cmd, BackendOptions& options) {
  std::map<std::string, BackendKind> kinds;
  for (BackendKind k : available_backends()) kinds[backend_kind_name(k)] = k;
  cmd->add_option("--backend", options.kind,
                  "backend running the model: cpu (fast kernels) or reference (plain scalar code, slow)")
      ->transform(CLI::CheckedTransformer(kinds))
      ->default_str(backend_kind_name(options.kind));
  cmd->add_option("--threads", options.threads, "threads of the cpu backend (0 = all cores)");
}

}  // namespace dsv4::cli

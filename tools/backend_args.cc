#include "backend_args.h"

#include <cstdio>

#include <string>
#include <vector>

namespace dsv4::cli {

void add_backend_options(CLI::App* cmd, BackendOptions& options) {
  std::vector<std::string> names;
  for (BackendKind k : available_backends()) names.push_back(backend_kind_name(k));
  cmd->add_option_function<std::string>(
         "--backend", [&options](const std::string& name) { options.kind = parse_backend_kind(name); },
         "backend running the model: cpu (fast kernels) or reference (plain scalar code, slow)")
      ->check(CLI::IsMember(names))
      ->default_str(backend_kind_name(options.kind));
  cmd->add_option("--threads", options.threads, "threads of the cpu backend (0 = all cores)");
}

void add_weight_options(CLI::App* cmd, bool& prefault, WeightPlacement& weights) {
  cmd->add_option_function<std::string>(
         "--weights", [&weights](const std::string& name) { weights = parse_weight_placement(name); },
         "where the cpu backend reads the weights: memory (a copy on huge pages: faster steps, a "
         "slower start), mapped (the checkpoint's pages in place), auto (memory where the checkpoint "
         "fits in available memory)")
      ->check(CLI::IsMember({"auto", "mapped", "memory"}))
      ->default_str(weight_placement_name(weights));
  cmd->add_flag_callback(
      "--no-prefault", [&prefault] { prefault = false; },
      "map the weights' pages on first use instead of at load (faster start; the first steps fault)");
}

void print_open_notes(const Engine& engine) {
  for (const std::string& n : engine.notes) std::fprintf(stderr, "dsv4: note: %s\n", n.c_str());
}

}  // namespace dsv4::cli

// --backend and --threads: how every command that runs a model picks its backend; --no-prefault:
// how it maps the checkpoint.
#pragma once
#include <CLI/CLI.hpp>

#include "backend/backends.h"

namespace dsv4::cli {

void add_backend_options(CLI::App* cmd, BackendOptions& options);
// --no-prefault sets prefault to false (EngineOptions::prefault).
void add_prefault_option(CLI::App* cmd, bool& prefault);

}  // namespace dsv4::cli

// --backend and --threads: how every command that runs a model picks its backend.
#pragma once
#include <CLI/CLI.hpp>

#include "backend/backends.h"

namespace dsv4::cli {

void add_backend_options(CLI::App* cmd, BackendOptions& options);

}  // namespace dsv4::cli

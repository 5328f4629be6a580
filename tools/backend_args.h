// --backend and --threads: how every command that runs a model picks its backend; --weights and
// --no-prefault: where it reads the weights from.
#pragma once
#include <CLI/CLI.hpp>

#include "backend/backends.h"
#include "engine/engine.h"

namespace dsv4::cli {

void add_backend_options(CLI::App* cmd, BackendOptions& options);
// --weights auto|mapped|memory (EngineOptions::weights); --no-prefault sets prefault to false
// (EngineOptions::prefault).
void add_weight_options(CLI::App* cmd, bool& prefault, WeightPlacement& weights);
// What opening the checkpoint found that a user should know (Engine::notes), on standard error.
void print_open_notes(const Engine& engine);

}  // namespace dsv4::cli

// --stages N and --stage-layers: a command run as the stages of a pipeline over MPI ranks
//   mpirun -np N dsv4 generate|chat|serve --stages N ...
// Rank 0 runs the command; every other rank opens its share of the checkpoint and serves its
// layers to rank 0's passes until rank 0 is done (distributed/mpi_stages.h).
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <vector>

#include "distributed/mpi_stages.h"
#include "engine/engine.h"

namespace dsv4::cli {

struct StageArgs {
  int stages = 1;
  std::vector<int64_t> layers;  // --stage-layers: layers per stage
};
void add_stage_options(CLI::App* cmd, StageArgs& args);

class StagedRun {
 public:
  // Null for one process (--stages 1). Every rank calls it at the same point, before anything
  // that only rank 0 does (a port, a prompt file): MPI starts, the checkpoints are compared, rank
  // 0's plan of the layers goes to all. `options` (its drafter, rollback) becomes the stage's.
  static std::unique_ptr<StagedRun> start(const StageArgs& args, const std::string& model, EngineOptions& options);
  ~StagedRun();  // rank 0: stops the stages if stop() was not called

  bool worker() const { return session_->rank() > 0; }
  // Rank > 0: opens this stage's share and serves rank 0's passes until it stops; the exit code.
  int serve(const std::string& model, EngineOptions options);
  // Rank 0: stops the stages; what each measured, and the layers each held, as JSON.
  nlohmann::json stop();
  // Rank 0: the other stages are being ended (mpirun passed them the signal that stopped this
  // rank): no stop goes round.
  void abandon() { stopped_ = true; }
  MpiStageLink& link() { return *link_; }

 private:
  std::unique_ptr<MpiSession> session_;
  std::unique_ptr<MpiStageLink> link_;
  bool stopped_ = false;
};

}  // namespace dsv4::cli

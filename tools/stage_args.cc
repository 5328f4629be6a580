#include "stage_args.h"

#include <csignal>
#include <cstdio>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/model_files.h"

namespace dsv4::cli {

namespace {

// mpirun ends a job whose rank died by signalling the others: rank 0 says so before it goes
// (the line above it, mpirun's, names the rank).
extern "C" void on_stop_signal(int) {
  static const char kLine[] =
      "dsv4: error: the pipeline stopped: mpirun ended this rank (a stage failed or was stopped; mpirun's message "
      "names it)\n";
  (void)!::write(2, kLine, sizeof kLine - 1);
  std::_Exit(1);
}

// A later stage that mpirun ends (rank 0 was stopped, or another stage failed and mpirun says so)
// ends quietly: rank 0 or mpirun reports why.
extern "C" void on_worker_stop_signal(int) { std::_Exit(0); }

}  // namespace

void add_stage_options(CLI::App* cmd, StageArgs& args) {
  cmd->add_option("--stages", args.stages,
                  "run as N pipeline stages, one per MPI rank (mpirun -np N dsv4 ... --stages N): rank r holds a "
                  "range of the layers and reads only their weights; rank 0 also the embedding, head and drafter, "
                  "and runs the command")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--stage-layers", args.layers,
                  "layers per stage, e.g. 10,17,16 (default: balanced by the bytes a decode step reads)")
      ->delimiter(',');
}

std::unique_ptr<StagedRun> StagedRun::start(const StageArgs& args, const std::string& model, EngineOptions& options) {
  if (args.stages <= 1) {
    DSV4_CHECK(args.layers.empty() || args.layers.size() == 1, "--stage-layers needs --stages");
    return nullptr;
  }
  DSV4_CHECK(MpiSession::launched_by_mpirun(), "--stages ", args.stages, " runs one stage per MPI rank: start it "
             "with mpirun -np ", args.stages, " dsv4 ... --stages ", args.stages,
             " (as root, add --allow-run-as-root; across machines, --hostfile)");
  std::unique_ptr<StagedRun> run(new StagedRun());
  run->session_ = std::make_unique<MpiSession>(nullptr, nullptr);
  MpiSession& session = *run->session_;
  DSV4_CHECK(session.size() == args.stages, "--stages ", args.stages, " but mpirun started ", session.size(),
             " ranks (mpirun -np ", args.stages, ")");
  try {
    run->link_ = std::make_unique<MpiStageLink>(session, model, [&] {
      StagePlan plan;
      const auto files = ModelFiles::open(model);
      plan.first_layers = plan_stage_layers(*files, args.stages, args.layers);
      plan.max_rollback = options.max_rollback;
      plan.drafter = options.load_mtp;
      return plan;
    });
  } catch (const std::exception&) {
    if (session.rank() == 0) throw;
    // (Every rank has the same failures: rank 0 reports them; the others end quietly.)
    run.reset();
    std::_Exit(1);
  }
  const StagePlan& plan = run->link_->plan();
  options.stage_link = run->link_.get();
  options.max_rollback = plan.max_rollback;
  options.load_mtp = plan.drafter;
  if (session.rank() == 0) {
    std::signal(SIGTERM, on_stop_signal);
    std::string layout;
    for (int s = 0; s < args.stages; ++s)
      layout += cat(s ? ", " : "", "stage ", s, ": layers ", plan.first_layers[size_t(s)], "..",
                    plan.first_layers[size_t(s) + 1] - 1);
    std::fprintf(stderr, "dsv4: %d pipeline stages (%s; stage 0 also the embedding, head and drafter)\n",
                 args.stages, layout.c_str());
  }
  return run;
}

int StagedRun::serve(const std::string& model, EngineOptions options) {
  options.progress = {};  // (rank 0 draws progress; the others say nothing unless they fail)
  std::signal(SIGTERM, on_worker_stop_signal);
  std::signal(SIGINT, on_worker_stop_signal);
  try {
    auto engine = Engine::open(model, options);
    for (const std::string& note : engine->notes)
      std::fprintf(stderr, "dsv4: stage %d (%s): note: %s\n", session_->rank(), session_->host().c_str(), note.c_str());
    serve_stage(*engine->target, *link_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsv4: error: stage %d (rank %d on %s): %s\n", session_->rank(), session_->rank(),
                 session_->host().c_str(), e.what());
    session_->abort(1);  // (rank 0 and the other stages wait on this one: end the job)
  }
  return 0;
}

nlohmann::json StagedRun::stop() {
  nlohmann::json j = nlohmann::json::array();
  if (stopped_ || !link_ || worker()) return j;
  stopped_ = true;
  const std::vector<StageStats> stats = stop_stages(*link_);
  for (size_t s = 0; s < stats.size(); ++s) {
    const StageStats& st = stats[s];
    j.push_back({{"stage", s},
                 {"layers", {link_->first_layer(int(s)), link_->first_layer(int(s) + 1)}},
                 {"micro_batches", st.passes},
                 {"rows", st.rows},
                 {"compute_s", st.compute_seconds},
                 {"wait_s", st.wait_seconds},
                 {"send_s", st.send_seconds},
                 {"bytes_sent", st.bytes_sent},
                 {"messages_sent", st.messages_sent}});
    if (s == 0) j.back()["split_passes"] = st.split_passes;
  }
  return j;
}

StagedRun::~StagedRun() {
  try {
    stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsv4: error: stopping the pipeline stages: %s\n", e.what());
  }
  link_.reset();
}

}  // namespace dsv4::cli

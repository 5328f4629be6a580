// Pipeline stages over MPI (model/stage_link.h): rank r of the job is stage r.
//
//   mpirun -np N dsv4 generate|chat|serve --stages N ...     (the same flags on every rank)
//
// Rank 0 schedules, samples, prints and serves; every rank opens the checkpoint and reads only
// its own layers' weights. The messages are MPI point-to-point (whatever transport the job's
// Open MPI picked: shared memory on one host, TCP or RDMA between hosts); a rank waiting for one
// polls and sleeps rather than spin, so that ranks sharing cores do not take each other's.
#pragma once
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/stage_link.h"

namespace dsv4 {

class ModelFiles;

// The MPI runtime of a staged run: initialized (serialized threads: the server's scheduler thread
// sends and receives, one call at a time) while it lives.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);  // throws Error where this build has no MPI
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  std::string host() const;
  // Ends the whole job (mpirun takes the other ranks down): an error on one rank the others wait on.
  [[noreturn]] void abort(int code) const;
  static bool available();  // this build links MPI
  static bool launched_by_mpirun();  // the environment of a rank that mpirun (or srun) started

 private:
  int rank_ = 0, size_ = 1;
};

// What every rank must agree on, as rank 0 decided it.
struct StagePlan {
  std::vector<int64_t> first_layers;  // stages + 1 entries: stage s holds [first_layers[s], first_layers[s + 1])
  int64_t max_rollback = 16;
  bool drafter = true;                // rank 0 loads a drafter: the stages compute its taps
  int threads = 0;                    // (each rank's own, reported)
};

// The layers of each stage: `counts` as given (one per stage, summing to the layer count), or
// balanced by the bytes a decode step reads (a layer's attention, shared expert and k of its E
// routed experts; stage 0 also reads the head and the drafter, so it gets fewer layers).
std::vector<int64_t> plan_stage_layers(const ModelFiles& files, int stages, const std::vector<int64_t>& counts);

// A checkpoint's identity across machines: its config.json, its index, its shards' names, sizes, headers and
// 64 samples of each shard's bytes.
uint64_t checkpoint_fingerprint(const std::filesystem::path& dir);

class MpiStageLink final : public StageLink {
 public:
  // Every rank calls this together: rank 0 makes the plan (make_plan), every rank fingerprints its
  // checkpoint, and all learn together whether any of that failed (then every rank throws the
  // failures, each naming its rank and host: no rank is left waiting on one that gave up); a rank
  // with a different checkpoint is refused, naming both; rank 0's plan goes to all (plan()).
  MpiStageLink(MpiSession& session, const std::filesystem::path& model, const std::function<StagePlan()>& make_plan);
  ~MpiStageLink() override;

  int stages() const override { return session_.size(); }
  int stage() const override { return session_.rank(); }
  int64_t first_layer(int s) const override { return plan_.first_layers.at(size_t(s)); }
  void send_next(StageMessage&& m) override;
  StageMessage receive_previous() override;
  const std::shared_ptr<CacheJournal>& journal() const override { return journal_; }
  StageStats& stats() override { return stats_; }
  const StagePlan& plan() const { return plan_; }
  MpiSession& session() { return session_; }

 private:
  struct Pending;
  void complete_sends(bool wait_all);

  MpiSession& session_;
  StagePlan plan_;
  std::shared_ptr<CacheJournal> journal_ = std::make_shared<CacheJournal>();
  StageStats stats_;
  std::deque<std::unique_ptr<Pending>> pending_;  // sends in flight, oldest first
};

// Stage s > 0: serves stage 0's passes for this stage's layers until stage 0 stops the pipeline.
// `model` is this process's Transformer (set_stage_link(link) done).
class Transformer;
void serve_stage(Transformer& model, MpiStageLink& link);

// Stage 0: stops the pipeline (every stage's loop ends) and returns what each stage measured,
// stage 0's first.
std::vector<StageStats> stop_stages(StageLink& link);

}  // namespace dsv4

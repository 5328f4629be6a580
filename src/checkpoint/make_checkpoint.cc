#include "checkpoint/make_checkpoint.h"

#include <chrono>
#include <fstream>
#include <future>
#include <mutex>
#include <regex>

#include <nlohmann/json.hpp>

#include "checkpoint/aligned_weights.h"
#include "checkpoint/mirror_dspark_weights.h"
#include "checkpoint/mirror_weights.h"
#include "checkpoint/random_weights.h"
#include "checkpoint/safetensors_writer.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace dsv4 {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kBatchBytes = uint64_t(24) << 20;  // output bytes generated per batch

// A chunk of a batch: its bytes lie in the batch's arena, weights of all chunks first
// (so that consecutive chunks of a tensor are contiguous and go out in one write), then scales.
struct ChunkRef {
  size_t job;
  int64_t chunk;
  ChunkSize size;
  uint64_t weight_at = 0, scale_at = 0;
};

struct Batch {
  std::vector<ChunkRef> refs;
  std::vector<uint8_t> arena;
};

// Removes the files of an earlier checkpoint in `dir` (shards, index), nothing else.
void remove_old_checkpoint(const fs::path& dir) {
  static const std::regex kShard(R"(model(-\d{5}-of-\d{5})?\.safetensors(\.partial)?)");
  for (auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, kShard) || name == "model.safetensors.index.json") fs::remove(e.path());
  }
}

// Writes the chunks of one batch in order; a weight's scale tensor is collected over its
// chunks and written right after the weight's last chunk.
class BatchSink {
 public:
  BatchSink(ShardedWriter& writer, const std::vector<WeightJob>& jobs) : writer_(writer), jobs_(jobs) {}

  void write(const Batch& batch) {
    const std::vector<ChunkRef>& refs = batch.refs;
    for (size_t i = 0, j; i < refs.size(); i = j + 1) {
      j = i;  // [i, j]: consecutive chunks of one tensor
      while (j + 1 < refs.size() && refs[j + 1].job == refs[i].job) ++j;
      const WeightJob& job = jobs_[refs[i].job];
      if (refs[i].chunk == 0) {
        writer_.begin_tensor(job.outputs[0].name);
        scale_.clear();
      }
      const uint64_t weight_end = refs[j].weight_at + refs[j].size.weight;
      const uint64_t scale_end = refs[j].scale_at + refs[j].size.scale;
      writer_.write(batch.arena.data() + refs[i].weight_at, size_t(weight_end - refs[i].weight_at));
      scale_.insert(scale_.end(), batch.arena.begin() + long(refs[i].scale_at), batch.arena.begin() + long(scale_end));
      written_ += (weight_end - refs[i].weight_at) + (scale_end - refs[i].scale_at);
      if (refs[j].chunk + 1 == job.num_chunks() && job.outputs.size() > 1)
        writer_.write_tensor(job.outputs[1].name, scale_.data(), scale_.size());
    }
  }
  uint64_t written() const { return written_; }

 private:
  ShardedWriter& writer_;
  const std::vector<WeightJob>& jobs_;
  std::vector<uint8_t> scale_;
  uint64_t written_ = 0;
};

}  // namespace

MakeCheckpointResult write_checkpoint(const fs::path& out, const ModelConfig& config,
                                      const std::vector<WeightJob>& jobs, const WriteOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  std::error_code ec;
  fs::create_directories(out, ec);
  DSV4_CHECK(fs::is_directory(out), out.string(), ": cannot create the output directory",
             ec ? ": " + ec.message() : std::string());
  remove_old_checkpoint(out);

  uint64_t total = 0;
  for (const WeightJob& job : jobs) {
    DSV4_CHECK(job.num_chunks() > 0, "make-checkpoint: tensor '", job.name, "' is empty");
    total += job.bytes();
  }

  ShardedWriter writer(out, plan_shards(job_outputs(jobs), options.max_shard_bytes, options.min_shards));
  BatchSink sink(writer, jobs);
  ThreadPool pool(options.threads);
  std::vector<std::vector<float>> scratch(size_t(pool.size()));  // per worker

  // Batches of consecutive chunks, generated in parallel while the previous batch is written.
  Batch batches[2];
  std::future<void> pending;
  size_t job = 0;
  int64_t chunk = 0;
  for (int b = 0; job < jobs.size(); b ^= 1) {
    Batch& batch = batches[b];
    batch.refs.clear();
    uint64_t weight_bytes = 0, scale_bytes = 0;
    while (job < jobs.size() && (batch.refs.empty() || weight_bytes + scale_bytes < kBatchBytes)) {
      const ChunkSize size = jobs[job].chunk_size(chunk);
      batch.refs.push_back({job, chunk, size, weight_bytes, scale_bytes});
      weight_bytes += size.weight;
      scale_bytes += size.scale;
      if (++chunk == jobs[job].num_chunks()) {
        ++job;
        chunk = 0;
      }
    }
    for (ChunkRef& r : batch.refs) r.scale_at += weight_bytes;
    batch.arena.resize(size_t(weight_bytes + scale_bytes));

    // Pool workers must not throw: the first error is kept and rethrown here.
    std::exception_ptr error;
    std::mutex error_mutex;
    pool.run(int64_t(batch.refs.size()), [&](int64_t i, int worker) {
      const ChunkRef& r = batch.refs[size_t(i)];
      try {
        generate_chunk(jobs[r.job], options.seed, r.chunk, batch.arena.data() + r.weight_at,
                       batch.arena.data() + r.scale_at, scratch[size_t(worker)]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    });
    if (error) std::rethrow_exception(error);
    if (pending.valid()) pending.get();  // the other batch is written: its memory is free again
    pending = std::async(std::launch::async, [&, b] {
      sink.write(batches[b]);
      if (options.progress) options.progress(sink.written(), total);
    });
  }
  if (pending.valid()) pending.get();
  writer.finish();

  const fs::path config_path = out / "config.json";
  std::ofstream cfg(config_path);
  cfg << config.to_json().dump(2) << "\n";
  cfg.close();
  DSV4_CHECK(cfg.good(), config_path.string(), ": cannot write");

  MakeCheckpointResult result;
  result.config = config;
  result.bytes = writer.total_bytes() + fs::file_size(config_path);
  result.shards = writer.num_shards();
  for (auto& j : jobs) result.tensors += j.outputs.size();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

MakeCheckpointResult make_checkpoint(const MakeCheckpointOptions& options) {
  DSV4_CHECK(!options.out.empty(), "make-checkpoint: no output directory (--out)");
  const Preset& preset = find_preset(options.preset);
  const ModelConfig config = build_config(preset, options.changes);
  DSV4_CHECK(options.perturb == 0.0 || preset.weights != WeightKind::Random,
             "make-checkpoint: --perturb applies to the aligned and mirror presets only");
  std::vector<WeightJob> jobs;
  switch (preset.weights) {
    case WeightKind::Random: jobs = random_weight_jobs(config, options.with_mtp); break;
    case WeightKind::Aligned:
      jobs = aligned_weight_jobs(config, options.with_mtp, options.seed, AlignedOptions{options.perturb});
      break;
    case WeightKind::Mirror: {
      MirrorOptions m = options.mirror;
      m.perturb = options.perturb;
      jobs = mirror_weight_jobs(config, options.with_mtp, options.seed, m);
      break;
    }
    case WeightKind::MirrorDSpark: {
      MirrorDSparkOptions d = options.mirror_dspark;
      d.perturb = options.perturb;
      jobs = mirror_dspark_weight_jobs(config, options.with_mtp, options.seed, options.mirror, d);
      break;
    }
  }
  WriteOptions w;
  w.seed = options.seed;
  w.threads = options.threads;
  w.max_shard_bytes = options.max_shard_bytes;
  w.min_shards = options.min_shards;
  w.progress = options.progress;
  if (options.encoding == CheckpointEncoding::Release) return write_checkpoint(options.out, config, jobs, w);

  // The release encoding first, beside the output (removed afterwards), then transcoded.
  const fs::path release = options.out.string() + ".release-tmp";
  MakeCheckpointResult r = write_checkpoint(release, config, jobs, w);
  try {
    fs::create_directories(options.out);
    remove_old_checkpoint(options.out);
    const TranscodeResult t =
        transcode_checkpoint(release, options.out, options.encoding, options.max_shard_bytes, options.min_shards);
    r.bytes = t.bytes;
    r.shards = t.shards;
    r.tensors = t.tensors;
  } catch (...) {
    fs::remove_all(release);
    throw;
  }
  fs::remove_all(release);
  return r;
}

}  // namespace dsv4

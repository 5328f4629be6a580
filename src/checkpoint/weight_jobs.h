// The generation plan of a synthetic checkpoint: one job per stored weight (an FP8 or FP4
// weight together with its scale tensor), in the order of the tensor table
// expected_tensors(config, with_mtp). A job produces its logical values (the dequantized
// domain) row stripe by row stripe ("chunks" of ~64K values, so that they stay in the
// cache between generation and encoding; FP8 chunks are whole 128-row tile stripes), and
// generate_chunk() encodes them exactly as the release format stores them. Chunks are independent: chunk i of a job draws from
// RandomStream(seed, job name, i), so any thread may generate any chunk.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend/weight_view.h"
#include "checkpoint/random_stream.h"
#include "checkpoint/safetensors_writer.h"
#include "io/config.h"

namespace dsv4 {

// How a job's values are stored: the formats the engine reads (their byte math in one place).
using Encoding = WeightFormat;

// Fills the logical values of rows [row0, row1) (row-major, `cols` per row) of a job.
using FillValues = std::function<void(int64_t row0, int64_t row1, RandomStream& rng, float* out)>;
using FillInts = std::function<void(int64_t row0, int64_t row1, RandomStream& rng, int64_t* out)>;

struct ChunkSize {
  uint64_t weight = 0, scale = 0;  // bytes of the chunk's rows of the weight and of its scale
};

struct WeightJob {
  std::string name;                  // stream key and messages: the weight tensor's name
  Encoding encoding = Encoding::F32;
  int64_t rows = 1, cols = 1;        // logical [out, in]; vectors have rows == 1
  std::vector<TensorDecl> outputs;   // stored tensors: the weight, then its scale (FP8 / FP4)
  FillValues fill;                   // every encoding but I64
  FillInts fill_ints;                // I64
  std::optional<int> fixed_fp8_scale_exp;  // FP8: every tile scale 2^exp instead of the amax rule

  int64_t chunk_rows() const;        // rows per chunk (FP8: a multiple of 128)
  int64_t num_chunks() const;
  ChunkSize chunk_size(int64_t chunk) const;
  uint64_t bytes() const;            // all outputs
};

// The jobs for every tensor of expected_tensors(config, with_mtp), without fills.
std::vector<WeightJob> plan_weight_jobs(const ModelConfig& config, bool with_mtp);

// The tensors of the jobs, in order (what the writer declares).
std::vector<TensorDecl> job_outputs(const std::vector<WeightJob>& jobs);

// Writes chunk `chunk` of the job: its rows of outputs[0] to `weight` and, for FP8 / FP4,
// its rows of the scale tensor to `scale` (sizes from job.chunk_size(chunk)). `scratch`
// holds the chunk's logical values (one per worker thread, reused).
void generate_chunk(const WeightJob& job, uint64_t seed, int64_t chunk, uint8_t* weight, uint8_t* scale,
                    std::vector<float>& scratch);

}  // namespace dsv4

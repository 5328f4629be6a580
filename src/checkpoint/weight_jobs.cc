#include "checkpoint/weight_jobs.h"

#include <algorithm>
#include <cstring>

#include "checkpoint/weight_quantizer.h"
#include "core/error.h"
#include "core/number_formats.h"
#include "model/weights.h"

namespace dsv4 {

namespace {
constexpr int64_t kChunkValues = int64_t(1) << 16;  // logical values per chunk (256 KB as floats)

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

int64_t WeightJob::chunk_rows() const {
  int64_t r = std::max<int64_t>(1, kChunkValues / std::max<int64_t>(cols, 1));
  if (encoding == Encoding::FP8) r = std::max<int64_t>(kFp8Block, r / kFp8Block * kFp8Block);
  return std::min(r, std::max<int64_t>(rows, 1));
}

int64_t WeightJob::num_chunks() const {
  if (rows == 0) return 0;
  const int64_t r = chunk_rows();
  return (rows + r - 1) / r;
}

uint64_t WeightJob::bytes() const {
  uint64_t b = 0;
  for (auto& t : outputs) b += t.nbytes();
  return b;
}

std::vector<WeightJob> plan_weight_jobs(const ModelConfig& config, bool with_mtp) {
  const std::vector<TensorSpec> specs = expected_tensors(config, with_mtp);
  std::vector<WeightJob> jobs;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    WeightJob job;
    job.name = s.name;
    const DType dtype = s.dtypes.front();
    job.outputs.push_back({s.name, dtype, s.shape});
    const bool quantized = dtype == DType::F8_E4M3 || (dtype == DType::I8 && ends_with(s.name, ".weight"));
    if (quantized) {
      DSV4_CHECK(i + 1 < specs.size() && specs[i + 1].dtypes.front() == DType::F8_E8M0, "tensor table: '",
                 s.name, "' is not followed by its scale");
      const TensorSpec& scale = specs[++i];
      job.outputs.push_back({scale.name, DType::F8_E8M0, scale.shape});
      job.encoding = dtype == DType::F8_E4M3 ? Encoding::FP8 : Encoding::FP4;
      job.rows = s.shape.at(0);
      job.cols = s.shape.at(1) * (job.encoding == Encoding::FP4 ? 2 : 1);
    } else {
      switch (dtype) {
        case DType::F32: job.encoding = Encoding::F32; break;
        case DType::BF16: job.encoding = Encoding::BF16; break;
        case DType::I64: job.encoding = Encoding::I64; break;
        default:
          throw Error(cat("tensor table: '", s.name, "' has dtype ", dtype_name(dtype),
                          ", which make-checkpoint cannot generate"));
      }
      job.cols = s.shape.empty() ? 1 : s.shape.back();
      job.rows = s.shape.size() >= 2 ? s.shape[0] : 1;  // the table holds vectors and matrices
    }
    jobs.push_back(std::move(job));
  }
  return jobs;
}

std::vector<TensorDecl> job_outputs(const std::vector<WeightJob>& jobs) {
  std::vector<TensorDecl> decls;
  for (auto& j : jobs) decls.insert(decls.end(), j.outputs.begin(), j.outputs.end());
  return decls;
}

ChunkSize WeightJob::chunk_size(int64_t chunk) const {
  const int64_t per = chunk_rows();
  const int64_t rows_in = std::min(rows, (chunk + 1) * per) - chunk * per;
  return {uint64_t(weight_code_bytes(encoding, rows_in, cols)),
          uint64_t(weight_scale_rows(encoding, rows_in) * weight_scale_cols(encoding, cols))};
}

void generate_chunk(const WeightJob& job, uint64_t seed, int64_t chunk, uint8_t* weight, uint8_t* scale,
                    std::vector<float>& scratch) {
  const int64_t per = job.chunk_rows();
  const int64_t row0 = chunk * per, row1 = std::min(job.rows, row0 + per);
  const int64_t n = (row1 - row0) * job.cols;
  RandomStream rng(seed, job.name, uint64_t(chunk));

  if (job.encoding == Encoding::I64) {
    DSV4_CHECK(bool(job.fill_ints), "make-checkpoint: no generator for tensor '", job.name, "'");
    std::vector<int64_t> ints(static_cast<size_t>(n));
    job.fill_ints(row0, row1, rng, ints.data());
    std::memcpy(weight, ints.data(), ints.size() * 8);
    return;
  }
  DSV4_CHECK(bool(job.fill), "make-checkpoint: no generator for tensor '", job.name, "'");
  scratch.resize(size_t(n));
  job.fill(row0, row1, rng, scratch.data());
  const float* x = scratch.data();

  switch (job.encoding) {
    case Encoding::F32: std::memcpy(weight, x, size_t(n) * 4); break;
    case Encoding::BF16: encode_bf16(x, n, weight); break;
    case Encoding::FP8: {
      const int64_t tiles = (job.cols + kFp8Block - 1) / kFp8Block;
      for (int64_t r = row0, s = 0; r < row1; r += kFp8Block, ++s) {
        const int64_t rows = std::min<int64_t>(kFp8Block, row1 - r);
        const float* xs = x + (r - row0) * job.cols;
        uint8_t* codes = weight + (r - row0) * job.cols;
        if (job.fixed_fp8_scale_exp)
          quantize_fp8_stripe_fixed(xs, rows, job.cols, *job.fixed_fp8_scale_exp, codes, scale + s * tiles);
        else
          quantize_fp8_stripe(xs, rows, job.cols, codes, scale + s * tiles);
      }
      break;
    }
    case Encoding::FP4: quantize_fp4_rows(x, row1 - row0, job.cols, weight, scale); break;
    case Encoding::I64:
    case Encoding::I32: break;  // integer tables are generated by their own path
    case Encoding::NVFP4:
    case Encoding::FP8F:
    case Encoding::INT4: throw Error(cat("make-checkpoint: '", job.name, "': ", weight_format_name(job.encoding),
                                         " is written by transcoding"));
  }
}

}  // namespace dsv4

// `dsv4 bench` on a checkpoint with a DSpark drafter: its draft step for K = 1..B, target passes
// of n rows, ring writes, the head; what a step must accept to pay; and end to end, plain decoding,
// DSpark at K = 1..B and auto, and (with --mtp-model: the same target with an MTP module) the MTP
// at K = 1..B and auto, interleaved.
#pragma once
#include <cstdint>
#include <string>

namespace dsv4::cli {

struct DSparkBenchArgs {
  std::string model, mtp_model;
  bool json = false;
  int threads = 0;
  int64_t context = 512;
  int reps = 5;
  int64_t e2e_prompt = 0, e2e_tokens = 64;
  int e2e_rounds = 3;
  double bandwidth_gib = 1.0;
};

int run_dspark_bench_command(const DSparkBenchArgs& a);

}  // namespace dsv4::cli

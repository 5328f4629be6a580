// A steady stream of single-token decode steps (target forward + rollback), MTP draft steps, or
// one layer's forward, on a checkpoint, for profilers: prefill a context, then loop. With
// DSV4_PROFILE_OPS=1 the backend prints its per-op times of the loop at exit.
//
//   decode_profile MODEL [--context N] [--steps N] [--threads N] [--draft | --layer L [--rows N] [--same]]
//   (--same: the rows are copies of one token's row, so all select the same experts)
//   decode_profile MODEL --context N --versus M [--steps N] [--threads N]
//   (two sequences, of N and M tokens of context, decoding new random tokens alternately as
//   generation does — new experts every step: the medians of both and their ratio, measured
//   interleaved so that the machine's drift hits both alike)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "dsv4_bench/memory_bandwidth.h"
#include "dsv4_bench/model_bench.h"
#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"

using namespace dsv4;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: decode_profile MODEL [--context N] [--steps N] [--threads N] [--draft]\n");
    return 2;
  }
  int64_t context = 200, steps = 50;
  int threads = 0;
  bool draft = false, same = false;
  int64_t layer = -1, rows = 1, versus = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--draft") draft = true;
    else if (a == "--same") same = true;
    else if (i + 1 < argc && a == "--context") context = std::atoll(argv[++i]);
    else if (i + 1 < argc && a == "--steps") steps = std::atoll(argv[++i]);
    else if (i + 1 < argc && a == "--threads") threads = std::atoi(argv[++i]);
    else if (i + 1 < argc && a == "--layer") layer = std::atoll(argv[++i]);
    else if (i + 1 < argc && a == "--rows") rows = std::atoll(argv[++i]);
    else if (i + 1 < argc && a == "--versus") versus = std::atoll(argv[++i]);
  }
  auto engine = Engine::open(argv[1], {{BackendKind::Cpu, threads}, true, 0, 16});
  Transformer& model = *engine->target;
  std::mt19937_64 rng(1);
  std::vector<int32_t> tokens(size_t(context + rows));
  for (auto& t : tokens) t = int32_t(2 + rng() % uint64_t(model.config().vocab_size - 2));
  auto seq = model.new_sequence();
  Transformer::Output out;
  auto prefill = [&](SequenceCache& s, std::span<const int32_t> prompt) {
    for (size_t at = 0; at < prompt.size(); at += 512) {
      Transformer::Request r{&s, prompt.subspan(at, std::min<size_t>(512, prompt.size() - at)), false,
                             /*no_logits=*/true, /*prompt=*/true};
      model.forward(std::span(&r, 1), out);
    }
  };
  prefill(*seq, std::span<const int32_t>(tokens.data(), size_t(context)));
  if (versus > 0) {
    std::vector<int32_t> other(static_cast<size_t>(versus));
    for (auto& t : other) t = int32_t(2 + rng() % uint64_t(model.config().vocab_size - 2));
    auto seq2 = model.new_sequence();
    prefill(*seq2, other);
    std::vector<double> ms[2];
    for (int64_t s = 0; s < steps; ++s)
      for (int which = 0; which < 2; ++which) {
        const int32_t token = int32_t(2 + rng() % uint64_t(model.config().vocab_size - 2));
        Transformer::Request q{which ? seq2.get() : seq.get(), std::span<const int32_t>(&token, 1), false};
        const auto t0 = std::chrono::steady_clock::now();
        model.forward(std::span(&q, 1), out);
        ms[which].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    const double a = bench::median(ms[0]), b = bench::median(ms[1]);
    std::printf("decode step after %lld tokens: median %.2f ms; after %lld tokens: median %.2f ms; "
                "tokens/s ratio (%lld vs %lld) %.3f over %lld interleaved steps\n",
                (long long)context, a, (long long)versus, b, (long long)versus, (long long)context, a / b, (long long)steps);
    return 0;
  }
  if (same) std::fill(tokens.begin() + context, tokens.end(), tokens[size_t(context)]);
  const std::span<const int32_t> next(tokens.data() + context, size_t(rows));
  std::vector<std::vector<float>> inputs;
  Workspace ws(*engine->backend);
  if (layer >= 0) inputs = bench::capture_block_inputs(model, *seq, same ? next.first(1) : next);
  if (same)
    for (auto& in : inputs) {
      const std::vector<float> row(in);
      for (int64_t r = 1; r < rows; ++r) in.insert(in.end(), row.begin(), row.end());
    }
  const int64_t width = out.hidden_width;
  const std::vector<float> hidden = out.hidden_host();
  std::vector<float> last(hidden.end() - width, hidden.end());
  auto mtp_seq = engine->mtp ? engine->mtp->new_sequence() : nullptr;
  if (auto* cpu = dynamic_cast<CpuBackend*>(engine->backend.get()); cpu && cpu->op_profile())
    cpu->op_profile()->clear();  // count the timed steps only
  std::vector<double> ms;
  for (int64_t s = 0; s < steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    if (layer >= 0) {
      bench::run_block(model.blocks()[size_t(layer)], *engine->backend, ws, *seq, next, context, inputs[size_t(layer)],
                       model.config().hc_mult, model.config().hidden_size);
    } else if (draft) {
      MtpModule::Output mo;
      MtpModule::Request q{mtp_seq.get(), last.data(), std::span<const int32_t>(tokens.data() + context, 1), false};
      engine->mtp->forward(std::span(&q, 1), mo);
      mtp_seq->truncate(0);
    } else {
      Transformer::Request q{seq.get(), std::span<const int32_t>(tokens.data() + context, 1), false};
      model.forward(std::span(&q, 1), out);
      seq->truncate(context);
    }
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("%s step: median %.2f ms over %lld steps\n", layer >= 0 ? "layer" : draft ? "draft" : "decode", bench::median(ms),
              (long long)steps);
  return 0;
}

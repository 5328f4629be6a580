// A steady stream of single-token decode steps (target forward + rollback) or MTP draft steps
// on a checkpoint, for profilers: prefill a short context, then loop.
//
//   decode_profile MODEL [--context N] [--steps N] [--threads N] [--draft]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "bench/memory_bandwidth.h"
#include "spec/engine.h"

using namespace dsv4;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: decode_profile MODEL [--context N] [--steps N] [--threads N] [--draft]\n");
    return 2;
  }
  int64_t context = 200, steps = 50;
  int threads = 0;
  bool draft = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--draft") draft = true;
    else if (i + 1 < argc && a == "--context") context = std::atoll(argv[++i]);
    else if (i + 1 < argc && a == "--steps") steps = std::atoll(argv[++i]);
    else if (i + 1 < argc && a == "--threads") threads = std::atoi(argv[++i]);
  }
  auto engine = Engine::open(argv[1], {threads, true, 0, 16});
  Transformer& model = *engine->target;
  std::mt19937_64 rng(1);
  std::vector<int32_t> tokens(size_t(context + 1));
  for (auto& t : tokens) t = int32_t(2 + rng() % uint64_t(model.config().vocab_size - 2));
  auto seq = model.new_sequence();
  Transformer::Output out;
  Transformer::Request r{seq.get(), std::span<const int32_t>(tokens.data(), size_t(context)), false};
  model.forward(std::span(&r, 1), out);
  const int64_t width = out.hidden_width;
  std::vector<float> last(out.hidden.end() - width, out.hidden.end());
  auto mtp_seq = engine->mtp ? engine->mtp->new_sequence() : nullptr;
  std::vector<double> ms;
  for (int64_t s = 0; s < steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    if (draft) {
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
  std::printf("%s step: median %.2f ms over %lld steps\n", draft ? "draft" : "decode", bench::median(ms),
              (long long)steps);
  return 0;
}

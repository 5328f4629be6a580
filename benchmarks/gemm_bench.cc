// GEMV / small-GEMM kernels at DeepSeek-V4-Flash shapes: time per call and weight GB/s for
// 1, 2, 4 and 8 activation rows (decode, and verification passes of k+1 tokens), next to the
// machine's read bandwidth. Weights live in arenas far larger than the caches (several copies,
// used in turn), so every call streams its weights from memory as a decode step does.
//
//   gemm_bench [--threads N] [--isa reference|avx2|avx512|avx512bf16|amx] [--reps R] [--only SUBSTRING] [--hot 1] [--rows 1,2,4,8,32]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/host_memory.h"
#include "dsv4_bench/memory_bandwidth.h"
#include "core/number_formats.h"

using namespace dsv4;

namespace {

struct Case {
  const char* name;
  WeightFormat format;
  int64_t M, K;
  bool quantize;
};

size_t weight_bytes(WeightFormat f, int64_t M, int64_t K, size_t* scale_bytes) {
  *scale_bytes = size_t(weight_scale_rows(f, M) * weight_scale_cols(f, K) * weight_format_traits(f).scale_bytes);
  return size_t(weight_code_bytes(f, M, K));
}

// Sane scales (~2^-8 .. 2^-1) in the format's encoding of them.
void fill_scales(uint8_t* p, size_t n, WeightFormat f) {
  for (size_t j = 0; j < n; ++j) {
    switch (f) {
      case WeightFormat::NVFP4: p[j] = uint8_t(0x10 + (j % 7) * 8); break;  // e4m3 2^-5 .. 2^1
      case WeightFormat::FP8F: {                                            // f32 ≈ 2^-6
        const uint8_t b[4] = {0x00, 0x00, 0x80, 0x3C};
        p[j] = b[j % 4];
        break;
      }
      case WeightFormat::INT4:
      case WeightFormat::INT2: p[j] = j % 2 ? 0x3C : uint8_t(j % 7 * 16); break;  // bf16 ≈ 2^-7
      default: p[j] = uint8_t(119 + (j % 7)); break;                             // E8M0
    }
  }
}
void fill(uint8_t* p, size_t n, WeightFormat f, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    uint8_t b = uint8_t(s >> 24);
    if ((f == WeightFormat::FP8 || f == WeightFormat::FP8F) && (b & 0x7F) == 0x7F) b = 0x30;
    if ((f == WeightFormat::BF16 || f == WeightFormat::F32) && (i % 2 || f == WeightFormat::F32)) b &= 0x3F;  // finite
    p[i] = b;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, reps = 20;
  std::string only;
  bool hot = false;  // one copy of the weights: from the caches where they fit (compute speed)
  std::vector<int64_t> rows_list = {1, 2, 4, 8, 32};
  CpuIsa isa = default_isa();
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--threads") threads = std::atoi(v.c_str());
    else if (a == "--reps") reps = std::atoi(v.c_str());
    else if (a == "--only") only = v;
    else if (a == "--hot") hot = v == "1";
    else if (a == "--rows") {  // comma-separated row counts
      rows_list.clear();
      for (size_t p = 0; p < v.size();) {
        const size_t q = v.find(',', p);
        rows_list.push_back(std::atoll(v.substr(p, q - p).c_str()));
        p = q == std::string::npos ? v.size() : q + 1;
      }
    }
    else if (a == "--isa")
      isa = v == "amx" ? CpuIsa::Amx : v == "avx512bf16" ? CpuIsa::Avx512Bf16 : v == "avx512" ? CpuIsa::Avx512 : v == "avx2" ? CpuIsa::Avx2 : CpuIsa::Reference;
  }
  CpuBackend be(threads, isa);
  const bench::BandwidthResult bw = bench::measure_read_bandwidth(be.pool());
  std::printf("threads %d, kernels %s, memory read bandwidth %.2f GB/s (median of %zu)\n", be.num_threads(),
              isa_name(be.isa()), bw.gbs, bw.all_gbs.size());
  const Case cases[] = {
      {"fp8  wq_b       [32768 x 1024]", WeightFormat::FP8, 32768, 1024, true},
      {"fp8  wo_b        [4096 x 8192]", WeightFormat::FP8, 4096, 8192, true},
      {"fp8  shared w1   [2048 x 4096]", WeightFormat::FP8, 2048, 4096, true},
      {"fp8  wo_a (bf16 act) [8192 x 4096]", WeightFormat::FP8, 8192, 4096, false},
      {"fp4  expert w1   [2048 x 4096]", WeightFormat::FP4, 2048, 4096, true},
      {"fp4  expert w2   [4096 x 2048]", WeightFormat::FP4, 4096, 2048, true},
      {"nvfp4 expert w1  [2048 x 4096]", WeightFormat::NVFP4, 2048, 4096, true},
      {"nvfp4 expert w2  [4096 x 2048]", WeightFormat::NVFP4, 4096, 2048, true},
      {"int4 expert w1   [2048 x 4096]", WeightFormat::INT4, 2048, 4096, false},
      {"int4 expert w2   [4096 x 2048]", WeightFormat::INT4, 4096, 2048, false},
      {"fp8f shared w1   [2048 x 4096]", WeightFormat::FP8F, 2048, 4096, true},
      {"bf16 compressor  [1024 x 4096]", WeightFormat::BF16, 1024, 4096, false},
      {"bf16 head      [129280 x 4096]", WeightFormat::BF16, 129280, 4096, false},
      {"int4 draft head [129280 x 4096]", WeightFormat::INT4, 129280, 4096, false},
      {"int2 draft head [129280 x 4096]", WeightFormat::INT2, 129280, 4096, false},
      {"int2 head slice  [2048 x 4096]", WeightFormat::INT2, 2048, 4096, false},
      {"f32  hc_fn      [24 x 16384]", WeightFormat::F32, 24, 16384, false},
  };
  std::printf("%-36s %6s %10s %9s %8s\n", "kernel", "rows", "us/call", "GB/s", "of bw");
  for (const Case& c : cases) {
    if (!only.empty() && std::string(c.name).find(only) == std::string::npos) continue;
    size_t sbytes = 0;
    const size_t wbytes = weight_bytes(c.format, c.M, c.K, &sbytes), total = wbytes + sbytes;
    const size_t copies = hot ? 1 : std::max<size_t>(1, (size_t(768) << 20) / total);
    // On 2 MiB pages where the system gives them, as the engine's weights (--weights memory):
    // over 4 KiB pages a cold call also pays a page walk per 4 KiB.
    const std::unique_ptr<uint8_t, void (*)(void*)> arena_memory(
        static_cast<uint8_t*>(cpu::allocate_host(copies * total)), cpu::release_host);
    const std::span<uint8_t> arena(arena_memory.get(), copies * total);
    fill(arena.data(), arena.size(), c.format, c.M + c.K);
    for (size_t i = 0; i < copies && sbytes; ++i) fill_scales(arena.data() + i * total + wbytes, sbytes, c.format);
    std::vector<WeightView> views(copies);
    for (size_t i = 0; i < copies; ++i) {
      WeightView& w = views[i];
      w.format = c.format;
      w.rows = c.M;
      w.cols = c.K;
      w.data = arena.data() + i * total;
      w.scale = sbytes ? w.data + wbytes : nullptr;
      w.scale_cols = weight_scale_cols(c.format, c.K);
      w.global_scale = c.format == WeightFormat::NVFP4 ? 0.0123f : 1.0f;
    }
    for (int64_t n : rows_list) {
      std::vector<float> x(size_t(n * c.K)), y(size_t(n * c.M));
      for (size_t i = 0; i < x.size(); ++i) x[i] = round_bf16(float((i * 7919) % 1000) / 500.0f - 1.0f);
      Tensor tx(x.data(), DType::F32, {n, c.K}), ty(y.data(), DType::F32, {n, c.M});
      const LinearOptions opt{c.quantize ? ActQuant::ByWeight : ActQuant::None, true};
      std::vector<double> us;
      for (int r = 0; r < reps + 2; ++r) {
        const WeightView& w = views[size_t(r) % copies];
        const auto t0 = std::chrono::steady_clock::now();
        be.linear(tx, w, ty, opt);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r >= 2) us.push_back(s * 1e6);
      }
      const double t = bench::median(us);
      const double gbs = double(total) / (t * 1e-6) / 1e9;
      std::printf("%-36s %6lld %10.1f %9.2f %7.0f%%\n", c.name, (long long)n, t, gbs, 100.0 * gbs / bw.gbs);
    }
  }
  return 0;
}

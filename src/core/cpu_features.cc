#include "core/cpu_features.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace dsv4 {

namespace {

CpuFeatures detect() {
  CpuFeatures f;
  // libgcc's detection also checks that the OS saves the AVX / AVX-512 register state (XCR0).
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.bmi2 = __builtin_cpu_supports("bmi2");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
  f.avx512_vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512vbmi = __builtin_cpu_supports("avx512vbmi");
  // F16C is not among the names every GCC knows: cpuid leaf 1, ecx bit 29 (usable iff AVX is).
  unsigned a, b, c, d;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
  f.f16c = f.avx2 && (c & (1u << 29)) != 0;
  // AMX: cpuid leaf 7 edx bits 24 (tile) and 22 (bf16); Linux hands out the 8 KB tile state only
  // on request (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA), for the whole process.
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  if ((d & (1u << 24)) && (d & (1u << 22))) {
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    const bool granted = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
    f.amx_tile = f.amx_bf16 = granted;
  }
  return f;
}

}  // namespace

bool CpuFeatures::has(CpuIsa isa) const {
  switch (isa) {
    case CpuIsa::Reference: return true;
    case CpuIsa::Avx2: return avx2 && fma && f16c;
    case CpuIsa::Avx512: return has(CpuIsa::Avx2) && avx512f && avx512bw && avx512vl && avx512dq;
    case CpuIsa::Avx512Bf16: return has(CpuIsa::Avx512) && avx512_bf16 && avx512vbmi;
    case CpuIsa::Amx: return has(CpuIsa::Avx512Bf16) && amx_tile && amx_bf16;
  }
  return false;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();  // immutable after the first call
  return features;
}

CpuIsa default_isa() {
  const CpuFeatures& f = cpu_features();
  CpuIsa best = CpuIsa::Reference;
  for (CpuIsa isa : {CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Avx512Bf16, CpuIsa::Amx})
    if (f.has(isa)) best = isa;
  if (const char* cap = std::getenv("DSV4_CPU_ISA")) {
    CpuIsa want = best;
    if (!std::strcmp(cap, "reference") || !std::strcmp(cap, "scalar")) want = CpuIsa::Reference;
    else if (!std::strcmp(cap, "avx2")) want = CpuIsa::Avx2;
    else if (!std::strcmp(cap, "avx512")) want = CpuIsa::Avx512;
    else if (!std::strcmp(cap, "avx512bf16")) want = CpuIsa::Avx512Bf16;
    else if (!std::strcmp(cap, "amx")) want = CpuIsa::Amx;
    if (uint8_t(want) < uint8_t(best)) best = want;
  }
  return best;
}

const char* isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Reference: return "reference";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
    case CpuIsa::Avx512Bf16: return "avx512bf16";
    case CpuIsa::Amx: return "amx";
  }
  return "?";
}

}  // namespace dsv4

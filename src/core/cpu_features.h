// What the CPU we run on can do, detected once (cpuid, and the OS's saving of the vector
// state), and which instruction set the CPU kernels use.
//
// AVX2 + FMA + F16C is the baseline every supported machine has; AVX-512 (F, BW, VL, DQ)
// kernels run where present, and where the CPU also has BF16 dot products and VBMI byte
// permutes, kernels that decode weights to bf16 with table lookups and multiply with vdpbf16ps;
// where it also has AMX tiles (and the OS grants their state), those decoded weights are
// multiplied on the tile unit (Sapphire Rapids and later: ~20× the vector units' bf16 rate).
// DSV4_CPU_ISA=reference|avx2|avx512|avx512bf16|amx in the environment caps
// the choice (for comparisons and for testing the AVX2 path on an AVX-512 machine).
#pragma once
#include <cstdint>

namespace dsv4 {

enum class CpuIsa : uint8_t {
  Reference,  // the scalar reference kernels
  Avx2,       // AVX2 + FMA + F16C
  Avx512,     // AVX-512 F/BW/VL/DQ
  Avx512Bf16, // AVX-512 as above + BF16 dot products + VBMI byte permutes (Zen 4, Sapphire Rapids)
  Amx,        // Avx512Bf16 + AMX tiles with bf16 products, usable by this process (Sapphire Rapids)
};

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false, bmi2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_vnni = false, avx512vbmi = false;
  bool amx_tile = false, amx_bf16 = false;  // the CPU has them and the OS granted this process their state

  bool has(CpuIsa isa) const;
};

const CpuFeatures& cpu_features();
// The best instruction set this machine supports, capped by DSV4_CPU_ISA when set.
CpuIsa default_isa();
const char* isa_name(CpuIsa isa);

}  // namespace dsv4

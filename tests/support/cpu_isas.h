// The SIMD instruction sets of this machine, lowest first (what the kernel tests run over).
#pragma once
#include <vector>

#include "core/cpu_features.h"

namespace dsv4::test {

inline std::vector<CpuIsa> simd_isas() {
  std::vector<CpuIsa> isas;
  for (CpuIsa isa : {CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Avx512Bf16, CpuIsa::Amx})
    if (cpu_features().has(isa)) isas.push_back(isa);
  return isas;
}

}  // namespace dsv4::test

// The tile configuration every AMX kernel of this backend uses (include after the amx-tile target
// pragma): eight tiles of 16 rows × 64 bytes. A thread loads it once; kernels that share it can
// follow one another on a thread without reloading.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace dsv4::cpu {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

inline void configure_tiles() {
  thread_local bool configured = false;
  if (configured) return;
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  _tile_loadconfig(&cfg);
  configured = true;
}

}  // namespace dsv4::cpu

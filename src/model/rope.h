// RoPE settings of a layer: compressed layers use compress_rope_theta with YaRN,
// window-only layers and the MTP layer use rope_theta without it.
#pragma once
#include "backend/backend.h"
#include "io/config.h"

namespace dsv4 {

inline RopeSpec rope_for_layer(const ModelConfig& c, int64_t compress_ratio) {
  RopeSpec s;
  s.rope_dims = c.qk_rope_head_dim;
  if (compress_ratio > 0) {
    s.theta = c.compress_rope_theta;
    s.yarn = c.rope_scaling.enabled;
    s.factor = c.rope_scaling.factor;
    s.beta_fast = c.rope_scaling.beta_fast;
    s.beta_slow = c.rope_scaling.beta_slow;
    s.original_max_position = c.rope_scaling.original_max_position_embeddings;
  } else {
    s.theta = c.rope_theta;
  }
  return s;
}

}  // namespace dsv4

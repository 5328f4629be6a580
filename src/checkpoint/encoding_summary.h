// The encoding of each module group of a bound model and the weight bytes one decode step reads
// for one token under it (what `dsv4 inspect` shows): decoding is bound by these bytes, so they
// say what an encoding buys.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/config.h"
#include "model/weights.h"

namespace dsv4 {

struct ModuleEncoding {
  std::string module;                            // "target attention", "routed experts", ...
  std::map<std::string, uint64_t> format_bytes;  // "FP8" -> bytes of the group's weights in that format
  uint64_t bytes = 0;                            // all of the group's weights
  double bytes_per_token = 0;                    // read by one decode step for one token (DSpark: one draft step)
  std::string note;                              // how bytes_per_token is counted
  std::string per = "token";                     // what bytes_per_token is per: "token", "draft step"

  // Formats by bytes, largest first: "FP8 95%, BF16 4%, F32 1%".
  std::string encoding() const;
};

// Groups: embed, target attention (attention, its norm and hyper-connection of every layer),
// router and norms (gate, bias, tid2eid, FFN norm and hyper-connection), shared experts, routed
// experts (a token reads num_experts_per_tok of a layer's experts), head (final norm, hc head,
// the vocabulary projection), MTP (one draft step's own weights: the head is the target's), DSpark
// (what one draft step of a B-row block reads, per step: see dspark_draft_step below).
// Unbound views count nothing.
std::vector<ModuleEncoding> summarize_encodings(const ModelWeights& weights, const ModelConfig& config);

// Bytes one target decode step reads per token: every group but the drafter's (MTP, DSpark).
double target_decode_bytes_per_token(const std::vector<ModuleEncoding>& modules);

}  // namespace dsv4

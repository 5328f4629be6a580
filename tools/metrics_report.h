// The drafting statistics and speeds of a generation run, as JSON fields or one text line.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "speculative/decode_metrics.h"

namespace dsv4::cli {

// Adds prefill/decode tokens per second and the drafting statistics to `j`.
void add_metrics(nlohmann::json& j, const DecodeMetrics& m, int draft);
// "prefill: x tokens/s, decode: y tokens/s[, drafted ..., accepted ... (rate), mean accepted length z]"
std::string metrics_line(const DecodeMetrics& m, int draft);

}  // namespace dsv4::cli

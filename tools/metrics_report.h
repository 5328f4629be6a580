// The drafting statistics and speeds of a generation run, as JSON fields or one text line.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "speculative/decode_metrics.h"
#include "speculative/draft_length.h"
#include "speculative/verify_scheduler.h"

namespace dsv4::cli {

// Adds prefill/decode tokens per second and the drafting statistics to `j`; with `auto`, what the
// verify scheduler measured (its costs, and the steps it ran without drafts).
void add_metrics(nlohmann::json& j, const DecodeMetrics& m, const DraftLength& draft,
                 const VerifyScheduler* scheduler = nullptr);
// "prefill: x tokens/s, decode: y tokens/s[, drafted ..., accepted ... (rate), mean accepted length z]"
std::string metrics_line(const DecodeMetrics& m, const DraftLength& draft);

}  // namespace dsv4::cli

// How MoE router logits become expert scores (config.json "scoring_func"). Shared by the
// configuration (which parses it) and the backends (whose routing op applies it).
#pragma once

namespace dsv4 {

enum class ScoringFunc { SqrtSoftplus, Sigmoid, Softmax };

}  // namespace dsv4

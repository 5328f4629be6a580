// Helpers of the speculative-decoding tests: generated checkpoints and loaded engines.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "spec/engine.h"
#include "spec/speculative_decoder.h"

namespace dsv4::test {

// A tiny checkpoint generated once per test binary run (cached by name in the scratch dir).
std::filesystem::path generated_checkpoint(const std::string& name, const std::string& preset, uint64_t seed,
                                           const std::vector<std::string>& set = {},
                                           const std::vector<int64_t>& ratios = {}, double perturb = 0.0);

// Generates with the given options (proposer used when draft_tokens > 0).
std::vector<SequenceOutput> generate(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                     const GenerateOptions& options, DecodeMetrics* metrics = nullptr);

std::vector<int32_t> random_prompt(int64_t length, int64_t vocab, uint64_t seed);

}  // namespace dsv4::test

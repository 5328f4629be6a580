#include "support/spec_support.h"

#include <cstring>
#include <functional>
#include <random>
#include <unistd.h>

#include <gtest/gtest.h>

#include "checkpoint/make_checkpoint.h"
#include "support/test_support.h"

namespace dsv4::test {

std::filesystem::path generated_checkpoint(const std::string& name, const std::string& preset, uint64_t seed,
                                           const std::vector<std::string>& set, const std::vector<int64_t>& ratios,
                                           double perturb) {
  // Cached in the build tree, keyed by every parameter (a changed recipe gets a new directory).
  std::string key = preset + "|" + std::to_string(seed) + "|" + std::to_string(perturb);
  for (auto& s : set) key += "|" + s;
  for (auto r : ratios) key += "|" + std::to_string(r);
  const std::filesystem::path dir =
      std::filesystem::path(DSV4_TEST_TMP) / ("ckpt-" + name + "-" + std::to_string(std::hash<std::string>{}(key) % 1000000));
  if (std::filesystem::exists(dir / "model.safetensors.index.json")) return dir;
  // ctest runs test cases as parallel processes: write privately, then move into place
  // (if another process got there first, its identical checkpoint stays).
  const std::filesystem::path mine = dir.string() + ".tmp" + std::to_string(::getpid());
  std::filesystem::remove_all(mine);
  MakeCheckpointOptions o;
  o.preset = preset;
  o.seed = seed;
  o.out = mine;
  o.perturb = perturb;
  for (auto& s : set) o.changes.set.push_back(parse_set_option(s));
  if (!ratios.empty()) o.changes.ratios = ratios;
  std::filesystem::create_directories(mine);
  make_checkpoint(o);
  std::error_code ec;
  std::filesystem::rename(mine, dir, ec);
  if (ec) std::filesystem::remove_all(mine);
  return dir;
}

std::vector<SequenceOutput> generate(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                     const GenerateOptions& options, DecodeMetrics* metrics) {
  SpeculativeDecoder decoder(*engine.target, options.draft_tokens > 0 ? engine.proposer.get() : nullptr);
  auto out = decoder.generate(prompts, options);
  if (metrics) *metrics = decoder.metrics();
  return out;
}

std::filesystem::path mirror_checkpoint(double perturb) {
  return generated_checkpoint("mirror", "mirror", 7, {}, {}, perturb);
}

std::filesystem::path mirror_dspark_checkpoint(double perturb) {
  return generated_checkpoint("mirror-dspark", "mirror-dspark", 7, {}, {}, perturb);
}

std::vector<std::vector<float>> dspark_fresh_draft(Engine& engine, const std::vector<int32_t>& all, int64_t P,
                                                   int64_t L, const std::vector<int32_t>& drafts) {
  DSparkDrafter& drafter = *engine.dspark;
  auto seq = engine.target->new_sequence();
  auto rings = drafter.new_sequence();
  Transformer::Output out;
  for (int64_t first = 0; first < L;) {  // the prompt as a prompt, then the rest
    const int64_t n = first == 0 ? std::min(P, L) : L - first;
    Transformer::Request r{seq.get(), std::span<const int32_t>(all.data() + first, size_t(n)), false, false,
                           first == 0, true};
    engine.target->forward(std::span(&r, 1), out);
    const DSparkDrafter::Context ctx{rings.get(), 0, n, n};
    drafter.extend_context(std::span(&ctx, 1), out.taps);
    first += n;
  }
  DSparkDrafter::Output draft;
  const DSparkDrafter::BlockRequest block{rings.get(), all[size_t(L)], int64_t(drafts.size())};
  drafter.draft(std::span(&block, 1), draft);
  std::vector<std::vector<float>> rows;
  std::vector<float> bias;
  int32_t prev = all[size_t(L)];
  for (size_t k = 0; k < drafts.size(); ++k) {
    drafter.markov_bias(std::span(&prev, 1), bias);
    std::vector<float> row(draft.base_row(0, int64_t(k)), draft.base_row(0, int64_t(k)) + draft.vocab);
    for (size_t v = 0; v < row.size(); ++v) row[v] += bias[v];
    rows.push_back(std::move(row));
    prev = drafts[k];
  }
  return rows;
}

std::vector<int32_t> concat(const std::vector<int32_t>& prompt, const std::vector<int32_t>& generated) {
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  return all;
}

TeacherForced teacher_forced(Engine& engine, std::span<const int32_t> tokens) {
  auto seq = engine.target->new_sequence();
  TeacherForced tf;
  Transformer::Request r{seq.get(), tokens, true};
  engine.target->forward(std::span(&r, 1), tf.out);
  tf.hidden = tf.out.hidden_host();
  return tf;
}

std::vector<std::vector<float>> mtp_chain(Engine& engine, const std::vector<float>& hidden,
                                          const std::vector<int32_t>& all, int64_t L,
                                          const std::vector<int32_t>& drafts) {
  MtpModule& mtp = *engine.mtp;
  auto seq = mtp.new_sequence();
  MtpModule::Output out;
  MtpModule::Request r{seq.get(), hidden.data(), std::span<const int32_t>(all.data() + 1, size_t(L)), false};
  mtp.forward(std::span(&r, 1), out);
  std::vector<std::vector<float>> logits;
  std::vector<float> stream;
  for (size_t d = 0;; ++d) {
    logits.emplace_back(out.logits_row(0), out.logits_row(0) + out.vocab);
    if (d + 1 >= drafts.size()) break;
    const std::vector<float> streams = out.streams_host();  // (the last row's: the one with logits)
    stream.assign(streams.begin(), streams.end());
    MtpModule::Request next{seq.get(), stream.data(), std::span<const int32_t>(&drafts[d], 1), false};
    mtp.forward(std::span(&next, 1), out);
  }
  return logits;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

int compare_first_drafts(const SequenceOutput& run, const SequenceOutput& reference) {
  int compared = 0;
  for (const StepRecord& a : run.steps) {
    if (a.drafts.empty()) continue;
    for (const StepRecord& b : reference.steps)
      if (b.position == a.position && !b.drafts.empty()) {
        EXPECT_EQ(a.drafts[0], b.drafts[0]) << "position " << a.position;
        const size_t dv = a.draft_logits.size() / a.drafts.size();  // (the draft head's rows)
        EXPECT_TRUE(b.draft_logits.size() >= dv && same_bits(a.draft_logits.data(), b.draft_logits.data(), dv))
            << "position " << a.position << ": first draft's logits";
        ++compared;
      }
  }
  return compared;
}

std::vector<int32_t> random_prompt(int64_t length, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> p(static_cast<size_t>(length));
  p[0] = 0;  // BOS
  for (size_t i = 1; i < p.size(); ++i) p[i] = int32_t(rng() % uint64_t(vocab));
  return p;
}

}  // namespace dsv4::test

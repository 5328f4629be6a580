// dsv4 score: teacher-forced evaluation of a token sequence — the target's logits after the
// prefill and after every following token, its hidden streams, the MTP's logits, perplexity,
// and optionally every named intermediate of the first two calls.
#include <cmath>
#include <cstdio>

#include "backend_args.h"
#include "commands.h"
#include "core/error.h"
#include "engine/dspark_trace.h"
#include "engine/engine.h"
#include "tensor_file.h"
#include "stage_args.h"
#include "token_args.h"

namespace dsv4::cli {

namespace {

struct ScoreArgs {
  bool prefault = true;  // --no-prefault
  WeightPlacement weights = WeightPlacement::Auto;  // --weights
  std::string model, tokens, tokens_file, out, dump;
  int64_t prompt_len = 1;
  BackendOptions backend;
  StageArgs stages;  // --stages: the same logits from a pipeline of processes
};

double log_softmax_at(const float* logits, int64_t V, int32_t token) {
  double mx = logits[0];
  for (int64_t v = 1; v < V; ++v) mx = std::max(mx, double(logits[v]));
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(double(logits[v]) - mx);
  return double(logits[token]) - mx - std::log(sum);
}

int argmax(const float* v, int64_t n) { return int(std::max_element(v, v + n) - v); }

double perplexity(const std::vector<float>& logits, std::span<const int32_t> tokens, int64_t P, int64_t V) {
  const int64_t T = int64_t(tokens.size());
  double nll = 0;
  for (int64_t t = P; t < T; ++t) nll -= log_softmax_at(logits.data() + (t - P) * V, V, tokens[size_t(t)]);
  return std::exp(nll / double(T - P));
}

// A DSpark checkpoint: the reference's teacher-forced drafting protocol (engine/dspark_trace.h),
// written under the golden data's names.
int score_dspark(Engine& engine, const std::vector<int32_t>& tokens, int64_t P, const std::string& out_path) {
  const int64_t T = int64_t(tokens.size());
  DSV4_CHECK(P < T, "score: a DSpark checkpoint drafts after the prompt: --prompt-len ", P,
             " must be below the number of tokens (", T, ")");
  const std::vector<int64_t> stage_steps{0, T - P - 1};
  const DSparkTrace t = dspark_teacher_forced(engine, tokens, P, /*trace_stages=*/true, stage_steps);
  const int64_t B = t.block, V = t.vocab, N = t.steps;
  std::printf("perplexity over positions %lld..%lld: %.4f\n", (long long)P, (long long)T - 1,
              perplexity(t.target_logits, tokens, P, V));
  int64_t agree = 0, total = 0;  // drafts equal to the token at their position, in order per step
  for (int64_t j = 0; j < N; ++j)
    for (int64_t k = 1; k <= B; ++k) {
      const int64_t at = t.step_pos[size_t(j)] + 1 + k;  // the position draft k proposes for
      if (at >= T) break;
      ++total;
      if (t.draft_ids[size_t(j * (B + 1) + k)] != tokens[size_t(at)]) break;
      ++agree;
    }
  std::printf("DSpark: %lld stages, block %lld; %lld steps; teacher-forced drafts matching the sequence in order: "
              "%lld of %lld\n", (long long)t.stages, (long long)B, (long long)N, (long long)agree, (long long)total);
  if (out_path.empty()) return 0;
  TensorMap result;
  result["tokens"] = i64_tensor({T}, std::vector<int64_t>(tokens.begin(), tokens.end()));
  result["prompt_len"] = i64_tensor({1}, {P});
  result["target.logits"] = f32_tensor({N + 1, V}, t.target_logits);
  result["dspark.main_hidden"] = f32_tensor({T, t.taps_width}, t.main_hidden);
  result["dspark.main_x"] = f32_tensor({T - 1, t.hidden}, t.main_x);
  result["dspark.ring_after_prefill"] = f32_tensor({t.stages, t.window, t.head_dim}, t.ring_after_prefill);
  result["dspark.step_pos"] = i64_tensor({N}, t.step_pos);
  result["dspark.draft_ids"] = i64_tensor({N, B + 1}, t.draft_ids);
  result["dspark.logits"] = f32_tensor({N, B, V}, t.logits);
  result["dspark.base_logits"] = f32_tensor({N, B, V}, t.base_logits);
  result["dspark.margins"] = f32_tensor({N, B}, t.margins);
  result["dspark.confidence"] = f32_tensor({N, B}, t.confidence);
  result["dspark.head_hidden"] = f32_tensor({N, B, t.hidden}, t.head_hidden);
  result["dspark.gate_indices"] = i64_tensor({N, t.stages, B, t.top_k}, t.gate_indices);
  const int64_t hc = engine.config().hc_mult;
  result["dspark.stage_out"] = f32_tensor({int64_t(stage_steps.size()), t.stages, B, hc, t.hidden}, t.stage_out);
  result["dspark.stage_out_steps"] = i64_tensor({int64_t(stage_steps.size())}, stage_steps);
  write_tensor_file(out_path, result);
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}

int run_score(const ScoreArgs& a) {
  DSV4_CHECK(a.stages.stages <= 1 || a.dump.empty(), "score: --dump-intermediates traces one process's layers; "
             "drop --stages");
  EngineOptions eo{.backend = a.backend, .prefault = a.prefault, .weights = a.weights};
  const std::unique_ptr<StagedRun> staged = StagedRun::start(a.stages, a.model, eo);
  if (staged && staged->worker()) return staged->serve(a.model, eo);
  auto engine = Engine::open(a.model, eo);
  const ModelConfig& c = engine->config();
  std::vector<int32_t> tokens = a.tokens_file.empty() ? parse_token_list(a.tokens) : read_token_file(a.tokens_file);
  const int64_t T = int64_t(tokens.size()), P = a.prompt_len, V = c.vocab_size, W = c.hc_mult * c.hidden_size;
  DSV4_CHECK(T >= 1, "score: no tokens");
  DSV4_CHECK(P >= 1 && P <= T, "score: --prompt-len ", P, " must be between 1 and the number of tokens (", T, ")");
  check_token_ids(tokens, V, "score");
  if (engine->dspark) {
    DSV4_CHECK(a.dump.empty(), "score: --dump-intermediates names the MTP's and the target's intermediates; a DSpark "
               "checkpoint writes its own under --out");
    return score_dspark(*engine, tokens, P, a.out);
  }

  Transformer& model = *engine->target;
  TensorMap dump;
  Tracer tracer;
  const bool dumping = !a.dump.empty();
  auto seq = model.new_sequence();
  Transformer::Output out;
  std::vector<float> logits, hidden;
  // Prefill (all rows' head when dumping, as the golden intermediates have them).
  Transformer::Request prefill{seq.get(), std::span<const int32_t>(tokens.data(), size_t(P)), dumping};
  model.forward(std::span(&prefill, 1), out, dumping ? &tracer : nullptr);
  logits.assign(out.logits.end() - V, out.logits.end());
  hidden = out.hidden_host();
  for (int64_t t = P; t < T; ++t) {
    Transformer::Request step{seq.get(), std::span<const int32_t>(&tokens[size_t(t)], 1), false};
    model.forward(std::span(&step, 1), out, dumping && t == P ? &tracer : nullptr);
    logits.insert(logits.end(), out.logits.begin(), out.logits.end());
    const std::vector<float> rows = out.hidden_host();
    hidden.insert(hidden.end(), rows.begin(), rows.end());
  }
  double nll = 0;
  for (int64_t t = P; t < T; ++t) nll -= log_softmax_at(logits.data() + (t - P) * V, V, tokens[size_t(t)]);
  if (T > P) std::printf("perplexity over positions %lld..%lld: %.4f\n", (long long)P, (long long)T - 1, std::exp(nll / double(T - P)));
  else std::printf("perplexity: no positions to score (prompt length = number of tokens)\n");

  TensorMap result;
  result["target.logits"] = f32_tensor({T - P + 1, V}, logits);
  result["target.hidden"] = f32_tensor({T, c.hc_mult, c.hidden_size}, hidden);
  result["tokens"] = i64_tensor({T}, std::vector<int64_t>(tokens.begin(), tokens.end()));
  result["prompt_len"] = i64_tensor({1}, {P});

  if (engine->mtp && T >= 2) {
    // The MTP at every position t: target streams at t and token t+1, one call (predicts t+2).
    MtpModule& mtp = *engine->mtp;
    auto mseq = mtp.new_sequence();
    MtpModule::Output mout;
    MtpModule::Request r{mseq.get(), hidden.data(), std::span<const int32_t>(tokens.data() + 1, size_t(T - 1)), true};
    mtp.forward(std::span(&r, 1), mout);
    result["mtp.logits"] = f32_tensor({T - 1, V}, mout.logits);
    int64_t agree = 0;
    for (int64_t t = 0; t + 2 < T; ++t) agree += argmax(mout.logits_row(0, t), V) == tokens[size_t(t + 2)];
    if (T >= 3)
      std::printf("MTP teacher-forced top-1 agreement with token t+2: %lld / %lld = %.4f\n", (long long)agree,
                  (long long)(T - 2), double(agree) / double(T - 2));
    if (dumping && P >= 2) {  // as the golden data: MTP prefill over 0..P-2, then its decode at P-1
      auto dseq = mtp.new_sequence();
      MtpModule::Request pre{dseq.get(), hidden.data(), std::span<const int32_t>(tokens.data() + 1, size_t(P - 1)), true};
      mtp.forward(std::span(&pre, 1), mout, &tracer);
      if (P < T) {
        MtpModule::Request dec{dseq.get(), hidden.data() + (P - 1) * W, std::span<const int32_t>(&tokens[size_t(P)], 1), false};
        mtp.forward(std::span(&dec, 1), mout, &tracer);
      }
    }
  } else if (!engine->mtp) {
    std::printf("MTP module: absent (no mtp.logits)\n");
  }
  if (!a.out.empty()) {
    write_tensor_file(a.out, result);
    std::printf("wrote %s\n", a.out.c_str());
  }
  if (dumping) {
    write_tensor_file(a.dump, tracer.entries());
    std::printf("wrote %zu intermediates to %s\n", tracer.entries().size(), a.dump.c_str());
  }
  return 0;
}

}  // namespace

void register_score(CLI::App& app, CommandResult& result) {
  auto args = std::make_shared<ScoreArgs>();
  CLI::App* cmd = app.add_subcommand("score", "Teacher-forced scoring: logits, hidden streams, MTP logits, perplexity");
  cmd->add_option("--model", args->model, "checkpoint directory")->required();
  auto* tok = cmd->add_option("--tokens", args->tokens, "token ids t0,t1,...");
  auto* file = cmd->add_option("--tokens-file", args->tokens_file, "file with one token id per line");
  tok->excludes(file);
  cmd->add_option("--prompt-len", args->prompt_len, "tokens in the prefill call (the rest are fed one at a time)")->required();
  cmd->add_option("--out", args->out, "write target.logits, target.hidden, mtp.logits (F32) to this .safetensors");
  cmd->add_option("--dump-intermediates", args->dump,
                  "write the named intermediates of the prefill and the first decode call to this .safetensors");
  add_backend_options(cmd, args->backend);
  add_weight_options(cmd, args->prefault, args->weights);
  add_stage_options(cmd, args->stages);
  cmd->callback([args, &result, tok, file] {
    if (tok->count() == 0 && file->count() == 0) throw CLI::RequiredError("--tokens or --tokens-file");
    result.exit_code = run_score(*args);
  });
}

}  // namespace dsv4::cli

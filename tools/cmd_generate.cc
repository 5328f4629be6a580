// dsv4 generate: greedy or sampled continuation of token-id prompts, plain or with MTP
// speculative decoding (--draft K). Several --prompt-tokens decode together as a batch.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "backend_args.h"
#include "commands.h"
#include "draft_setting.h"
#include "speculative/context_limit.h"
#include "core/error.h"
#include "engine/model_tokenizer.h"
#include "generate_text.h"
#include "grammar_args.h"
#include "metrics_report.h"
#include "progress_meter.h"
#include "engine/engine.h"
#include "speculative/speculative_decoder.h"
#include "stage_args.h"
#include "token_args.h"

namespace dsv4::cli {

namespace {

struct GenerateArgs {
  bool prefault = true;  // --no-prefault
  WeightPlacement weights = WeightPlacement::Auto;  // --weights
  std::string model;
  std::vector<std::string> prompt_tokens;
  std::string prompt;  // text (needs the checkpoint's tokenizer)
  std::string prompt_file, prompt_tokens_file;  // the same from a file ("-": standard input)
  int64_t max_new_tokens = 64;
  float temperature = 0.0f, top_p = 1.0f;
  int64_t top_k = 0;
  uint64_t seed = 0;
  bool json = false, ignore_eos = false, quiet = false;
  bool full_head = false;  // --full-head: no bounded greedy head
  DraftLength draft = kDefaultDraft;
  int64_t mtp_vocab = 0;
  DraftHeadFormat draft_head = DraftHeadFormat::Auto;
  int64_t prefill_chunk = SpeculativeDecoder::kDefaultPrefillChunk;
  int64_t max_context = 0;  // 0: the model's maximum position
  BackendOptions backend;
  GrammarArgs grammar;  // --json-schema / --grammar
  StageArgs stages;     // --stages, --stage-layers
};

int run_generate(const GenerateArgs& a) {
  const OutputGrammar grammar{load_output_grammar(a.grammar), a.grammar.file()};  // a bad file fails before the model loads
  const OutputGrammar* constrained = a.grammar.any() ? &grammar : nullptr;
  DSV4_CHECK(!constrained || !a.ignore_eos, "--ignore-eos cannot be combined with --json-schema / --grammar: the "
                                            "output ends where the grammar is complete");
  ProgressMeter meter(a.quiet);
  EngineOptions eo{.backend = a.backend, .load_mtp = a.draft.automatic || a.draft.tokens > 0, .mtp_vocab = a.mtp_vocab,
                   .draft_head = a.draft_head, .argmax_head = !a.full_head, .prefault = a.prefault,
                   .weights = a.weights, .progress = meter.opening()};
  const std::unique_ptr<StagedRun> staged = StagedRun::start(a.stages, a.model, eo);
  if (staged && staged->worker()) return staged->serve(a.model, eo);
  auto engine = Engine::open(a.model, eo);
  print_open_notes(*engine);
  const ModelConfig& c = engine->config();
  const DraftLength draft = effective_draft(*engine, a.draft, "generate");
  GenerateOptions o;
  o.max_new_tokens = a.max_new_tokens;
  apply_draft_length(draft, o);
  o.sampling = {a.temperature, a.top_k, a.top_p, a.seed};
  DSV4_CHECK(a.temperature >= 0, "--temperature must be >= 0");
  DSV4_CHECK(a.top_p > 0 && a.top_p <= 1, "--top-p must be in (0, 1]");
  if (!a.ignore_eos) o.eos = int32_t(c.eos_token_id);

  DSV4_CHECK(a.prefill_chunk > 0, "--prefill-chunk must be positive, got ", a.prefill_chunk);
  const int64_t sequences = std::max<int64_t>(1, int64_t(a.prompt_tokens.size()) + !a.prompt_tokens_file.empty());
  const ContextLimit limit = ContextLimit::check(c, a.max_context, sequences, a.prefill_chunk);
  // The --json facts beyond the decoding's own (stopping the stages collects theirs).
  const auto report = [&](nlohmann::json& j) {
    if (draft.tokens > 0) {
      j["drafter"] = engine->drafter_name();
      if (engine->mtp) j["draft_head"] = draft_head_format_name(engine->draft_head_format());
    }
    const ArgmaxHeadCounts& bounded = engine->target->argmax_head_counts();
    j["bounded_head"] = {{"rows", bounded.rows}, {"candidates", bounded.candidates}, {"fallbacks", bounded.fallbacks}};
    if (staged) j["stages"] = staged->stop();
  };
  if (!a.prompt.empty())
    return generate_text(*engine, a.prompt, o, a.json, a.prefill_chunk, &limit, constrained, &meter, report);
  if (!a.prompt_file.empty())
    return generate_text(*engine, read_text_file(a.prompt_file), o, a.json, a.prefill_chunk, &limit, constrained,
                         &meter, report);

  std::vector<std::vector<int32_t>> prompts;
  for (auto& p : a.prompt_tokens) {
    prompts.push_back(parse_token_list(p));
    check_token_ids(prompts.back(), c.vocab_size, "--prompt-tokens");
  }
  if (!a.prompt_tokens_file.empty()) {
    prompts.push_back(read_token_file(a.prompt_tokens_file));
    DSV4_CHECK(!prompts.back().empty(), a.prompt_tokens_file, ": no token ids");
    check_token_ids(prompts.back(), c.vocab_size, a.prompt_tokens_file);
  }
  int64_t longest = 0;
  for (auto& p : prompts) longest = std::max<int64_t>(longest, int64_t(p.size()));
  limit.apply(longest, o, "generate");
  // Token-id prompts with a grammar: the grammar is over the tokenizer's text all the same
  // (one mask for the batch: it keeps a state per sequence).
  std::unique_ptr<grammar::GrammarMask> mask;
  if (constrained) {
    const text::Tokenizer tok = load_model_tokenizer(engine->files->dir, c);
    mask = std::make_unique<grammar::GrammarMask>(compile_output_grammar(grammar.gbnf, grammar.file, tok, c, *o.eos));
    o.mask = mask.get();
  }
  SpeculativeDecoder decoder(*engine->target, engine->proposer.get());
  decoder.set_prefill_chunk(a.prefill_chunk);
  meter.watch_prefill(decoder);
  auto outputs = decoder.generate(prompts, o);
  const DecodeMetrics& m = decoder.metrics();
  bool all_complete = true;
  std::vector<bool> complete;
  for (auto& s : outputs) {
    complete.push_back(!mask || mask->complete(s.tokens));
    all_complete = all_complete && complete.back();
  }
  if (!all_complete) warn_incomplete(grammar);
  if (a.json) {
    nlohmann::json j;
    if (outputs.size() == 1) j["tokens"] = outputs[0].tokens;
    else for (auto& s : outputs) j["tokens"].push_back(s.tokens);
    if (mask && outputs.size() == 1) j["grammar_complete"] = complete[0];
    else if (mask) j["grammar_complete"] = complete;
    if (mask) add_mask_metrics(j, *mask);
    add_metrics(j, m, draft, decoder.scheduler());
    j["backend"] = engine->backend->name();
    report(j);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  for (auto& s : outputs) std::printf("%s\n", join_tokens(s.tokens).c_str());
  std::fprintf(stderr, "%s\n", metrics_line(m, draft).c_str());
  return 0;
}

}  // namespace

void register_generate(CLI::App& app, CommandResult& result) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate a continuation (greedy or sampled; --draft K|auto speculates with the checkpoint's drafter)");
  cmd->add_option("--model", args->model, "checkpoint directory")->required();
  auto* ids = cmd->add_option("--prompt-tokens", args->prompt_tokens,
                              "prompt token ids t0,t1,... (repeat for a batch decoded together)");
  auto* text = cmd->add_option("--prompt", args->prompt, "prompt text (tokenized with the checkpoint's tokenizer.json)");
  auto* text_file = cmd->add_option("--prompt-file", args->prompt_file,
                                    "prompt text from a file ('-': standard input), for prompts too long for an argument");
  auto* ids_file = cmd->add_option("--prompt-tokens-file", args->prompt_tokens_file,
                                   "prompt token ids from a file, one per line ('-': standard input)");
  ids->excludes(text);
  ids->excludes(text_file);
  text->excludes(text_file);
  text->excludes(ids_file);
  text_file->excludes(ids_file);
  cmd->add_option("--max-new-tokens", args->max_new_tokens, "tokens to generate at most (default 64)");
  cmd->add_option("--temperature", args->temperature, "0 = greedy (default)");
  cmd->add_option("--top-p", args->top_p, "nucleus sampling mass (default 1)");
  cmd->add_option("--top-k", args->top_k, "sample among the k most likely tokens (0 = all)");
  cmd->add_option("--seed", args->seed, "random seed for sampling");
  add_draft_option(cmd, args->draft,
                   "drafts per step proposed by the checkpoint's drafter (its MTP module or DSpark stages; 0 = no "
                   "speculation), or auto: each step verifies the drafts expected to pay on this machine");
  cmd->add_option("--mtp-vocab", args->mtp_vocab, "limit the draft LM head to the first N vocabulary rows (0 = all)");
  add_draft_head_option(cmd, args->draft_head);
  add_backend_options(cmd, args->backend);
  add_weight_options(cmd, args->prefault, args->weights);
  cmd->add_option("--prefill-chunk", args->prefill_chunk,
                  "prompt tokens per prefill pass (bounds memory; any size gives the same output)")
      ->capture_default_str();
  cmd->add_option("--max-context", args->max_context,
                  "longest sequence, prompt + generated (0 = the model's maximum); refused at start if its cache "
                  "cannot fit in available memory");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "do not stop at the end-of-sequence token");
  cmd->add_flag("--full-head", args->full_head,
                "greedy rows read the whole LM head (default: an 8-bit copy bounds every logit and only the rows "
                "that can be the argmax are computed exactly: the same tokens, about half the head's reads)");
  cmd->add_flag("--quiet", args->quiet, "no progress lines (drawn only on a terminal: opening the checkpoint, the prefill)");
  cmd->add_flag("--json", args->json, "print one JSON object with tokens, speeds and drafting statistics");
  add_grammar_options(cmd, args->grammar);
  add_stage_options(cmd, args->stages);
  cmd->callback([args, &result, ids, text, text_file, ids_file] {
    if (ids->count() + text->count() + text_file->count() + ids_file->count() == 0)
      throw CLI::RequiredError("--prompt-tokens, --prompt-tokens-file, --prompt or --prompt-file");
    result.exit_code = run_generate(*args);
  });
}

}  // namespace dsv4::cli

// dsv4 chat: an interactive multi-turn conversation in the DeepSeek-V4 chat format, the
// reply streamed as it is accepted (reasoning shown apart from the answer in thinking
// mode), with the acceptance statistics of speculative decoding on exit.
//
// Input is read line by line from stdin; "/clear" starts over, "/exit" or end of input quits.
// --prompt-file F makes the whole of F (a long document, say) the first user turn ('-': all of
// stdin, and the chat ends after that reply).
//
// --kv-cache-dir DIR keeps the conversation's state on disk after every reply (the prefix
// cache's disk tier, speculative/prefix_store.h) and its messages beside it; --resume goes on
// with the last conversation kept there, prefilling only the new turn (a conversation resumed
// tomorrow does not read its history again). Without --resume a new conversation still reuses
// what it shares with a kept one (the same system prompt).
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>

#include "backend_args.h"
#include "commands.h"
#include "draft_setting.h"
#include "progress_meter.h"
#include "grammar_args.h"
#include "core/error.h"
#include "engine/model_tokenizer.h"
#include "token_args.h"
#include "speculative/context_limit.h"
#include "engine/engine.h"
#include "speculative/prefix_cache.h"
#include "speculative/prefix_store.h"
#include "speculative/speculative_decoder.h"
#include "stage_args.h"
#include "text/chat_format.h"

namespace dsv4::cli {

namespace {

struct ChatArgs {
  bool prefault = true;  // --no-prefault
  WeightPlacement weights = WeightPlacement::Auto;  // --weights
  std::string model, system, prompt_file;
  bool thinking = false;
  bool quiet = false;        // --quiet: no progress lines
  DraftLength draft = kDefaultDraft;
  int64_t mtp_vocab = 0, max_new_tokens = 256, top_k = 0;
  DraftHeadFormat draft_head = DraftHeadFormat::Auto;
  float temperature = 0.0f, top_p = 1.0f;
  uint64_t seed = 0;
  BackendOptions backend;
  int64_t prefill_chunk = SpeculativeDecoder::kDefaultPrefillChunk;
  int64_t max_context = 0;  // 0: the model's maximum position
  GrammarArgs grammar;      // --json-schema / --grammar: every reply (after its reasoning)
  std::string kv_cache_dir; // conversations kept on disk
  bool resume = false;      // go on with the last one kept there
  int64_t kv_cache_disk_max = int64_t(32) << 30;
  StageArgs stages;         // --stages, --stage-layers
};

// The conversation beside its state in the kv cache directory: its messages (the format's context
// for the next turn), its tokens (what the state has read) and whether its last reply ended
// without EOS (the next turn then begins with one).
struct KeptChat {
  nlohmann::ordered_json messages;
  std::vector<int32_t> tokens;
  bool needs_eos = false;
};

std::filesystem::path chat_file(const std::string& dir, uint64_t identity) {
  char name[64];
  std::snprintf(name, sizeof name, "chat-%016" PRIx64 ".json", identity);
  return std::filesystem::path(dir) / name;
}

void write_chat(const std::filesystem::path& path, const KeptChat& c) {
  const std::filesystem::path temp = path.string() + ".tmp";
  {
    std::ofstream out(temp);
    out << nlohmann::ordered_json{{"messages", c.messages}, {"tokens", c.tokens}, {"needs_eos", c.needs_eos}}.dump();
    if (!out.good()) {
      std::fprintf(stderr, "dsv4 chat: %s: not written\n", temp.string().c_str());
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
}

KeptChat read_chat(const std::filesystem::path& path) {
  std::ifstream in(path);
  DSV4_CHECK(in.good(), path.string(), ": no conversation kept here to resume (run chat with --kv-cache-dir first)");
  KeptChat c;
  try {
    const nlohmann::ordered_json j = nlohmann::ordered_json::parse(in);
    c.messages = j.at("messages");
    c.tokens = j.at("tokens").get<std::vector<int32_t>>();
    c.needs_eos = j.at("needs_eos").get<bool>();
  } catch (const std::exception& e) {
    throw Error(cat(path.string(), ": not a kept conversation (", e.what(), ")"));
  }
  DSV4_CHECK(c.messages.is_array() && !c.tokens.empty(), path.string(), ": an empty conversation");
  return c;
}

// Streams one assistant turn: reasoning (thinking mode) until </think>, then the answer.
class TurnPrinter {
 public:
  TurnPrinter(const text::Tokenizer& tok, bool thinking) : stream_(tok, /*skip_special=*/true), thinking_(thinking) {
    think_end_ = tok.token_id("</think>").value_or(-1);
    std::printf(thinking_ ? "[thinking] " : "[answer] ");
  }
  void push(int32_t token) {
    if (thinking_ && token == think_end_) {
      std::printf("%s\n[answer] ", stream_.flush().c_str());
      thinking_ = false;
    } else {
      std::fputs(stream_.push(token).c_str(), stdout);
    }
    std::fflush(stdout);
  }
  void finish() { std::printf("%s\n", stream_.flush().c_str()); }

 private:
  text::StreamingDecoder stream_;
  bool thinking_;
  int32_t think_end_ = -1;
};

int run_chat(const ChatArgs& a) {
  const std::string gbnf = load_output_grammar(a.grammar);  // a bad file fails before the model loads
  DSV4_CHECK(a.stages.stages <= 1 || a.kv_cache_dir.empty(), "--kv-cache-dir keeps the conversation's state on "
             "one process's disk; with --stages each stage holds its own layers' caches: drop one of them");
  ProgressMeter meter(a.quiet);
  EngineOptions eo{.backend = a.backend, .load_mtp = a.draft.automatic || a.draft.tokens > 0, .mtp_vocab = a.mtp_vocab,
                   .draft_head = a.draft_head, .prefault = a.prefault, .weights = a.weights,
                   .progress = meter.opening()};
  const std::unique_ptr<StagedRun> staged = StagedRun::start(a.stages, a.model, eo);
  if (staged && staged->worker()) return staged->serve(a.model, eo);
  auto engine = Engine::open(a.model, eo);
  print_open_notes(*engine);
  const DraftLength draft = effective_draft(*engine, a.draft, "chat");
  const text::Tokenizer tok = load_model_tokenizer(engine->files->dir, engine->config());
  const text::ChatMode mode = a.thinking ? text::ChatMode::Thinking : text::ChatMode::Chat;
  DSV4_CHECK(a.prefill_chunk > 0, "--prefill-chunk must be positive, got ", a.prefill_chunk);
  const ContextLimit limit = ContextLimit::check(engine->config(), a.max_context, 1, a.prefill_chunk);
  GenerateOptions o;
  o.max_new_tokens = a.max_new_tokens;
  apply_draft_length(draft, o);
  o.sampling = {a.temperature, a.top_k, a.top_p, a.seed};
  o.eos = stop_token(tok, engine->config());
  std::shared_ptr<const grammar::CompiledGrammar> compiled;
  grammar::GrammarMaskOptions mask_options;
  if (a.grammar.any()) {
    compiled = compile_output_grammar(gbnf, a.grammar.file(), tok, engine->config(), *o.eos);
    if (a.thinking) mask_options = {true, tok.token_id(text::kThinkingEndToken).value_or(-1)};
    DSV4_CHECK(!a.thinking || mask_options.reasoning_end >= 0, "chat --thinking with a grammar needs a </think> token");
  }

  // The conversation is one decoder sequence that keeps its caches between turns: each turn
  // appends only its own tokens (the user message rendered as continuing the conversation, the
  // reference's incremental encoding) and the model never reads the conversation twice. Earlier
  // turns' reasoning stays in the context (the format's drop_thinking = false).
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!a.system.empty()) messages.push_back({{"role", "system"}, {"content", a.system}});
  const size_t system_messages = messages.size();
  text::EncodeOptions encode;
  encode.drop_thinking = false;
  o.keep_state = true;
  DecodeMetrics total;
  SpeculativeDecoder decoder(*engine->target, engine->proposer.get());
  meter.watch_prefill(decoder);
  decoder.set_prefill_chunk(a.prefill_chunk);
  bool talking = false;  // a conversation sequence exists
  SpeculativeDecoder::SequenceId conversation = 0;
  std::unique_ptr<PrefixStore> store;
  std::optional<KeptChat> resumed;  // until the first turn takes it up
  std::filesystem::path kept_path;
  if (!a.kv_cache_dir.empty()) {
    const uint64_t identity = engine->files->identity();
    store = std::make_unique<PrefixStore>(PrefixStore::Options{a.kv_cache_dir, identity, a.kv_cache_disk_max, 1},
                                          decoder, [](const std::string& l) { std::fprintf(stderr, "dsv4 chat: %s\n", l.c_str()); });
    o.reusable = true;
    kept_path = chat_file(a.kv_cache_dir, identity);
    if (a.resume) {
      resumed = read_chat(kept_path);
      messages = resumed->messages;
      std::printf("(resuming a conversation of %zu messages, %zu tokens)\n", messages.size(), resumed->tokens.size());
    }
  }
  // The first turn's sequence: from the kept state it shares the most with, else cold.
  auto start = [&](const std::vector<int32_t>& ids, const GenerateOptions& turn) {
    if (store)
      if (std::optional<SequenceState> s = store->load_best(ids)) {
        const int64_t cut = usable_cut(s->tokens, s->length(), s->cache->min_truncate_length(), ids);
        if (cut > 0) return decoder.add(ids, turn, view(*s), cut);
      }
    return decoder.add(ids, turn);
  };
  auto forget = [&] {
    if (!talking) return;
    decoder.cancel(conversation);
    decoder.release(conversation);
    talking = false;
  };
  std::string line;
  int turns = 0;
  std::optional<std::string> first_turn;
  if (!a.prompt_file.empty()) first_turn = read_text_file(a.prompt_file);
  for (;;) {
    if (first_turn) {
      line = std::move(*first_turn);
      first_turn.reset();
      std::printf(">>> (%s: %zu bytes)\n", a.prompt_file == "-" ? "standard input" : a.prompt_file.c_str(), line.size());
    } else {
      if (a.prompt_file == "-" && turns > 0) break;  // stdin held the one turn
      std::printf(">>> ");
      std::fflush(stdout);
      if (!std::getline(std::cin, line) || line == "/exit") break;
    }
    if (line == "/clear") {
      messages.erase(messages.begin() + long(system_messages), messages.end());
      forget();
      std::printf("(conversation cleared)\n");
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::ordered_json user = nlohmann::ordered_json::array({{{"role", "user"}, {"content", line}}});
    std::vector<int32_t> ids;
    if (resumed) {  // the kept conversation's tokens, then this turn continuing it
      text::EncodeOptions continuing = encode;
      continuing.context = messages;
      ids = resumed->tokens;
      if (resumed->needs_eos) ids.push_back(*o.eos);
      const std::vector<int32_t> more = tok.encode(text::encode_messages(user, mode, continuing), /*add_bos=*/false);
      ids.insert(ids.end(), more.begin(), more.end());
      resumed.reset();
    } else if (!talking) {  // the whole conversation so far (the system prompt), with the BOS token
      nlohmann::ordered_json all = messages;
      all.push_back(user[0]);
      ids = tok.encode(text::encode_messages(all, mode, encode), /*add_bos=*/false);
    } else {
      text::EncodeOptions continuing = encode;
      continuing.context = messages;
      ids = tok.encode(text::encode_messages(user, mode, continuing), /*add_bos=*/false);
      // A reply cut off by --max-new-tokens ends the way the format ends every assistant turn.
      if (!decoder.output(conversation).stopped_at_eos) ids.insert(ids.begin(), *o.eos);
    }
    GenerateOptions turn = o;
    const int64_t before = talking ? decoder.length(conversation) : 0;
    limit.apply(before + int64_t(ids.size()), turn, "chat: the conversation");
    turn.sampling.seed = a.seed + uint64_t(turns++);
    std::unique_ptr<grammar::GrammarMask> mask;  // this reply's: its output starts after `ids`
    if (compiled) {
      mask = std::make_unique<grammar::GrammarMask>(compiled, mask_options);
      turn.mask = mask.get();
    }
    if (talking) decoder.extend(conversation, ids, turn);
    else conversation = start(ids, turn);
    if (mask) mask->begin(size_t(conversation), size_t(before) + ids.size());
    talking = true;
    TurnPrinter printer(tok, a.thinking);
    decoder.reset_metrics();
    while (!decoder.finished(conversation))
      for (const SpeculativeDecoder::Event& e : decoder.step())
        for (size_t i = 0; i < e.count; ++i) printer.push(decoder.output(e.id).tokens[e.first + i]);
    printer.finish();
    total.add(decoder.metrics());
    const SequenceOutput& out = decoder.output(conversation);
    if (mask && !mask->complete(out.tokens))
      std::printf("(the reply was cut by --max-new-tokens before it completed the grammar of %s)\n", a.grammar.file().c_str());
    if (out.finish == FinishReason::ContextFull) forget();  // nothing more fits: the next turn starts over
    const std::string completion = tok.decode(out.tokens);
    messages.push_back(user[0]);
    try {
      messages.push_back(text::parse_completion(completion, mode).to_json());
    } catch (const std::exception&) {  // cut off by --max-new-tokens: keep the raw text as the reply
      messages.push_back({{"role", "assistant"}, {"content", tok.decode(out.tokens, true)}});
    }
    if (store && talking) {  // the conversation as it stands, for a later --resume
      const PrefixSource now = decoder.source(conversation);
      store->save(now, "chat");
      write_chat(kept_path, {messages, std::vector<int32_t>(now.tokens.begin(), now.tokens.end()), !out.stopped_at_eos});
    }
  }
  std::printf("\n%d turns, %lld tokens generated, %lld prompt tokens prefilled, decode %.2f tokens/s\n", turns,
              (long long)total.generated_tokens, (long long)total.prefill_rows, total.decode_tokens_per_s());
  if (draft.tokens > 0) {
    std::printf("speculative decoding (%s, k = %s): drafted %lld, accepted %lld (%.3f); by position:",
                engine->drafter_name(), draft_length_name(draft).c_str(),
                (long long)total.drafted, (long long)total.accepted, total.acceptance_rate());
    for (double r : total.acceptance_by_position()) std::printf(" %.3f", r);
    std::printf("; mean accepted length %.2f\n", total.mean_accepted_length());
  }
  return 0;
}

}  // namespace

void register_chat(CLI::App& app, CommandResult& result) {
  auto args = std::make_shared<ChatArgs>();
  CLI::App* cmd = app.add_subcommand("chat", "Interactive chat in the DeepSeek-V4 format (reads turns from stdin)");
  cmd->add_option("--model", args->model, "checkpoint directory (with tokenizer.json)")->required();
  cmd->add_flag("--quiet", args->quiet, "no progress lines (drawn only on a terminal: opening the checkpoint, a long prefill)");
  cmd->add_flag("--thinking", args->thinking, "thinking mode: the reply reasons inside <think>...</think> first");
  cmd->add_option("--system", args->system, "system prompt");
  add_draft_option(cmd, args->draft,
                   "drafts per step proposed by the checkpoint's drafter (MTP or DSpark; 0 = no speculation), or auto");
  cmd->add_option("--mtp-vocab", args->mtp_vocab, "limit the draft LM head to the first N vocabulary rows");
  add_draft_head_option(cmd, args->draft_head);
  cmd->add_option("--max-new-tokens", args->max_new_tokens, "longest reply in tokens (default 256)");
  cmd->add_option("--temperature", args->temperature, "0 = greedy (default)");
  cmd->add_option("--top-p", args->top_p, "nucleus sampling mass");
  cmd->add_option("--top-k", args->top_k, "sample among the k most likely tokens (0 = all)");
  cmd->add_option("--seed", args->seed, "random seed for sampling");
  add_backend_options(cmd, args->backend);
  add_weight_options(cmd, args->prefault, args->weights);
  add_stage_options(cmd, args->stages);
  cmd->add_option("--prompt-file", args->prompt_file,
                  "the first user turn from a file ('-': all of standard input, then the chat ends)");
  cmd->add_option("--prefill-chunk", args->prefill_chunk, "prompt tokens per prefill pass (bounds memory)")
      ->capture_default_str();
  cmd->add_option("--max-context", args->max_context,
                  "longest conversation in tokens (0 = the model's maximum); refused at start if its cache cannot "
                  "fit in available memory");
  add_grammar_options(cmd, args->grammar);
  cmd->add_option("--kv-cache-dir", args->kv_cache_dir,
                  "keep the conversation's state on disk after every reply (and reuse kept states a new conversation "
                  "shares, such as its system prompt)");
  cmd->add_option("--kv-cache-disk-max", args->kv_cache_disk_max, "bytes of states on disk (least recently used go)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd->add_flag("--resume", args->resume, "go on with the last conversation kept in --kv-cache-dir")
      ->needs("--kv-cache-dir");
  cmd->callback([args, &result] { result.exit_code = run_chat(*args); });
}

}  // namespace dsv4::cli

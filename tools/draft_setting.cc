#include "draft_setting.h"

#include <cstdio>

namespace dsv4::cli {

void add_draft_option(CLI::App* cmd, DraftLength& draft, const std::string& help) {
  cmd->add_option_function<std::string>(
         "--draft", [&draft](const std::string& text) { draft = parse_draft_length(text); }, help)
      ->default_str(draft_length_name(kDefaultDraft));
}

DraftLength effective_draft(const Engine& engine, const DraftLength& requested, const std::string& command) {
  if ((!requested.automatic && requested.tokens == 0) || engine.proposer)
    return resolve_draft_length(requested, engine.proposer.get());
  if (requested.automatic) return {};  // (auto without a drafter: plain decoding is what auto would choose)
  std::fprintf(stderr,
               "dsv4 %s: %s has no drafter (no mtp.0.* tensors: neither an MTP module nor DSpark stages): "
               "speculative decoding is off, the target decodes alone (--draft %s ignored)\n",
               command.c_str(), engine.files->dir.string().c_str(), draft_length_name(requested).c_str());
  return {};
}

void add_draft_head_option(CLI::App* cmd, DraftHeadFormat& format) {
  cmd->add_option_function<std::string>(
         "--draft-head", [&format](const std::string& name) { format = parse_draft_head_format(name); },
         "LM head the MTP drafts with: target (the model's own), fp8, int4 or int2 (a rounded copy made at "
         "start, each draft's 64 best logits recomputed exactly: drafting reads 1/2, 1/4 or 1/8 of the bytes; "
         "output unchanged), auto (int2 where the backend has a kernel for it, else int4, where the head "
         "allows a copy; else target). A DSpark drafter always drafts with the target's head")
      ->check(CLI::IsMember({"target", "fp8", "int4", "int2", "auto"}))
      ->default_str(draft_head_format_name(format));
}

}  // namespace dsv4::cli

#include "draft_setting.h"

#include <cstdio>

namespace dsv4::cli {

int effective_draft(const Engine& engine, int requested, const std::string& command) {
  if (requested == 0 || engine.proposer) return requested;
  std::fprintf(stderr,
               "dsv4 %s: %s has no MTP module (no mtp.0.* tensors): speculative decoding is off, the target "
               "decodes alone (--draft %d ignored)\n",
               command.c_str(), engine.files->dir.string().c_str(), requested);
  return 0;
}

void add_draft_head_option(CLI::App* cmd, DraftHeadFormat& format) {
  cmd->add_option_function<std::string>(
         "--draft-head", [&format](const std::string& name) { format = parse_draft_head_format(name); },
         "LM head the MTP drafts with: target (the model's own), fp8, int4 or int2 (a rounded copy made at "
         "start, each draft's 64 best logits recomputed exactly: drafting reads 1/2, 1/4 or 1/8 of the bytes; "
         "output unchanged), auto (int2 where the backend has a kernel for it, else int4, where the head "
         "allows a copy; else target)")
      ->check(CLI::IsMember({"target", "fp8", "int4", "int2", "auto"}))
      ->default_str(draft_head_format_name(format));
}

}  // namespace dsv4::cli

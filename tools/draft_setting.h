// The draft length a command runs with (`--draft K|auto`). Many repackagings of DeepSeek-V4 drop
// the drafter; such a checkpoint still runs: the target decodes alone, and the command says so once.
#pragma once
#include <string>

#include <CLI/CLI.hpp>

#include "engine/engine.h"
#include "speculative/draft_length.h"

namespace dsv4::cli {

// --draft K|auto (default auto: each step verifies what the verify scheduler expects to pay): or K
// drafts per step (0: plain decoding).
void add_draft_option(CLI::App* cmd, DraftLength& draft, const std::string& help);

// `requested` resolved against the checkpoint's drafter (auto: its maximum; a fixed K beyond it
// throws), or 0 when it has none (with one line on stderr naming the checkpoint where a fixed K
// was asked for; auto decodes plainly without a word).
DraftLength effective_draft(const Engine& engine, const DraftLength& requested, const std::string& command);

// --draft-head target|fp8|int4|int2|auto: the LM head the MTP drafts with (engine/draft_head.h).
void add_draft_head_option(CLI::App* cmd, DraftHeadFormat& format);

}  // namespace dsv4::cli

// The number of MTP drafts a command runs with. Many repackagings of DeepSeek-V4 drop the MTP
// module; such a checkpoint still runs: the target decodes alone, and the command says so once.
#pragma once
#include <string>

#include <CLI/CLI.hpp>

#include "engine/engine.h"

namespace dsv4::cli {

// `requested`, or 0 (with one line on stderr naming the checkpoint) when it has no MTP module.
int effective_draft(const Engine& engine, int requested, const std::string& command);

// --draft-head target|fp8|int4|int2|auto: the LM head the MTP drafts with (engine/draft_head.h).
void add_draft_head_option(CLI::App* cmd, DraftHeadFormat& format);

}  // namespace dsv4::cli

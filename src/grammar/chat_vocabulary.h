// The vocabulary a DeepSeek-V4 chat (or plain completion) is constrained over.
//
// The format's structural tokens are never text to a grammar: the tokens flagged special, and
// the added tokens of the format that are not flagged (<｜User｜>, <｜Assistant｜>, <think>,
// </think>, ｜DSML｜ ...: every added token spelled with DeepSeek's full-width bar "｜", and the
// think tags). A JSON answer therefore cannot contain a turn marker or a tool-call block.
//
// Tool calls are the exception: their DSML block *is* markup made of such tokens
// ("<｜DSML｜invoke name=...", and "<｜DSML｜tool_calls>" may be one special token). The
// tool-call grammar (dsml_tool_grammar.h) spells the markup as text, so for it the tokens whose
// content contains "｜DSML｜" are text, matched by their bytes — the model can write the block
// with its usual tokens, and what it writes decodes to exactly the text the grammar matched,
// which the chat parser reads back.
#pragma once
#include <cstdint>
#include <memory>

#include "grammar/token_grammar.h"
#include "text/tokenizer.h"

namespace dsv4::grammar {

// `vocab_size`: the model's (rows beyond the tokenizer's are never allowed). `eos`: the token
// that ends the output (allowed once the grammar is complete). `dsml_markup_as_text`: see above.
std::shared_ptr<const TokenVocabulary> chat_vocabulary(const text::Tokenizer& tokenizer, int32_t vocab_size,
                                                       int32_t eos, bool dsml_markup_as_text);

}  // namespace dsv4::grammar

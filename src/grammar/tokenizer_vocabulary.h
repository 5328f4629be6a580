// The grammar's view of a tokenizer: each token id's bytes, and which ids are special.
#pragma once
#include <memory>
#include <span>

#include "grammar/token_grammar.h"
#include "text/tokenizer.h"

namespace dsv4::grammar {

// `vocab_size` may exceed the tokenizer's (a model's embedding rows beyond it): those ids
// are special (never allowed as text), as are `also_special` (added tokens that are not flagged
// special but are structure, not text: </think>, the tool-call markers).
std::shared_ptr<const TokenVocabulary> vocabulary_of(const text::Tokenizer& tokenizer, int32_t vocab_size,
                                                     std::span<const int32_t> also_special = {});

}  // namespace dsv4::grammar

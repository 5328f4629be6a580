#include "grammar/chat_vocabulary.h"

#include <string_view>
#include <vector>

#include "grammar/tokenizer_vocabulary.h"
#include "text/chat_format.h"

namespace dsv4::grammar {

std::shared_ptr<const TokenVocabulary> chat_vocabulary(const text::Tokenizer& tokenizer, int32_t vocab_size,
                                                       int32_t eos, bool dsml_markup_as_text) {
  constexpr std::string_view kBar = "｜";  // in added tokens only: BPE tokens are byte-level text
  std::vector<int32_t> structural, markup;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const std::string& content = tokenizer.token_content(id);
    if (dsml_markup_as_text && content.find(text::kDsmlToken) != std::string::npos) markup.push_back(id);
    else if (content.find(kBar) != std::string::npos || content == text::kThinkingStartToken ||
             content == text::kThinkingEndToken)
      structural.push_back(id);
  }
  auto v = std::const_pointer_cast<TokenVocabulary>(vocabulary_of(tokenizer, vocab_size, structural));
  for (int32_t id : markup) {  // text even when flagged special
    v->bytes[size_t(id)] = tokenizer.token_bytes(id);
    v->special[size_t(id)] = 0;
  }
  v->eos = eos;
  return v;
}

}  // namespace dsv4::grammar

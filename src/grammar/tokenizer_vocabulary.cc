#include "grammar/tokenizer_vocabulary.h"

namespace dsv4::grammar {

std::shared_ptr<const TokenVocabulary> vocabulary_of(const text::Tokenizer& tokenizer, int32_t vocab_size,
                                                     std::span<const int32_t> also_special) {
  auto v = std::make_shared<TokenVocabulary>();
  const int32_t n = tokenizer.vocab_size();
  DSV4_CHECK(vocab_size >= n, "grammar: model vocabulary of ", vocab_size, " is smaller than the tokenizer's ", n);
  v->bytes.resize(size_t(vocab_size));
  v->special.assign(size_t(vocab_size), 1);
  for (int32_t id = 0; id < n; ++id) {
    if (tokenizer.is_special(id)) continue;
    v->bytes[size_t(id)] = tokenizer.token_bytes(id);
    v->special[size_t(id)] = 0;
  }
  for (int32_t id : also_special) {
    DSV4_CHECK(id >= 0 && id < vocab_size, "grammar: special token id ", id, " outside the vocabulary");
    v->bytes[size_t(id)].clear();
    v->special[size_t(id)] = 1;
  }
  v->eos = tokenizer.eos_id().value_or(-1);
  return v;
}

}  // namespace dsv4::grammar

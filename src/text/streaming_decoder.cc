#include "text/tokenizer.h"
#include "text/utf8.h"

namespace dsv4::text {

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(&tokenizer), skip_special_(skip_special) {}

std::string StreamingDecoder::push(int32_t id) {
  const std::string& bytes = tokenizer_->token_bytes(id);  // throws for an unknown id
  if (skip_special_ && tokenizer_->is_special(id)) return {};
  if (!first_token_ && tokenizer_->joins_tokens_with_space()) pending_.push_back(' ');
  first_token_ = false;
  pending_ += bytes;
  // Everything before a trailing sequence that more bytes could still complete is
  // final: repairing it now gives the same text as repairing the whole at the end.
  const size_t ready = utf8_emittable_prefix(pending_);
  std::string text = utf8_lossy(std::string_view(pending_).substr(0, ready));
  pending_.erase(0, ready);
  return text;
}

std::string StreamingDecoder::flush() {
  std::string text = utf8_lossy(pending_);
  pending_.clear();
  first_token_ = true;
  return text;
}

}  // namespace dsv4::text

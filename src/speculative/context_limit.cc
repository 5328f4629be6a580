#include "speculative/context_limit.h"

#include <algorithm>
#include <sstream>

#include "cache/sequence_cache.h"
#include "core/error.h"
#include "io/mapped_file.h"

namespace dsv4 {

ContextLimit ContextLimit::check(const ModelConfig& c, int64_t requested, int64_t sequences, int64_t prefill_chunk,
                                 int64_t available_bytes) {
  DSV4_CHECK(requested >= 0, "--max-context must be positive, got ", requested);
  ContextLimit l;
  l.tokens = requested > 0 ? requested : c.max_position_embeddings;
  DSV4_CHECK(l.tokens <= c.max_position_embeddings, "--max-context ", l.tokens, " exceeds the model's ",
             c.max_position_embeddings, " positions (max_position_embeddings in config.json)");
  const int64_t available = available_bytes >= 0 ? available_bytes : available_memory_bytes();
  if (available < 0) return l;  // unknown: nothing to check against
  const CacheFootprint f = model_cache_footprint(c, 16);
  const int64_t cache = sequences * f.at(l.tokens), work = prefill_chunk * kPrefillBytesPerRow;
  if (cache + work > available) {
    // What would fit: the longest context whose caches and the prefill's working set fit.
    const int64_t per_sequence = (available - work) / std::max<int64_t>(1, sequences) - f.fixed_bytes;
    const int64_t fits = per_sequence > 0 ? std::min(l.tokens - 1, per_sequence / std::max<int64_t>(1, f.bytes_per_token)) : 0;
    throw Error(cat("--max-context ", l.tokens, ": ", sequences, " sequence(s) need ", cache >> 20, " MiB of cache (",
                    f.bytes_per_token, " B per token + ", f.fixed_bytes >> 10, " KiB) and ~", work >> 20,
                    " MiB for prefill chunks of ", prefill_chunk, " tokens, but only ", available >> 20,
                    " MiB are available",
                    fits > 0 ? cat("; --max-context ", fits, " fits (or lower --prefill-chunk, or run fewer sequences)")
                             : cat("; lower --prefill-chunk, or free memory (--weights mapped leaves the weights in the "
                                   "page cache)")));
  }
  return l;
}

void ContextLimit::apply(int64_t prompt_tokens, GenerateOptions& o, const std::string& what) const {
  DSV4_CHECK(prompt_tokens < tokens, what, ": the prompt has ", prompt_tokens,
             " tokens, leaving no room under the context limit of ", tokens, " (--max-context)");
  o.max_new_tokens = std::min<int64_t>(o.max_new_tokens, tokens - prompt_tokens);
}

}  // namespace dsv4

#include "speculative/draft_length.h"

#include "core/error.h"
#include "speculative/speculative_decoder.h"

namespace dsv4 {

DraftLength parse_draft_length(const std::string& text, const std::string& what) {
  if (text == "auto") return {0, true};
  size_t used = 0;
  int k = -1;
  try {
    k = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  DSV4_CHECK(used == text.size() && !text.empty() && k >= 0 && k <= 15, what, " '", text,
             "' must be 'auto' or a number of drafts between 0 and 15");
  return {k, false};
}

std::string draft_length_name(const DraftLength& d) { return d.automatic ? "auto" : std::to_string(d.tokens); }

DraftLength resolve_draft_length(const DraftLength& d, const DraftProposer* proposer) {
  if (!proposer || (!d.automatic && d.tokens == 0)) return {0, false};
  const int most = proposer->max_drafts();
  if (d.automatic) return {most > 0 ? most : kAutoMaxChainDrafts, true};
  DSV4_CHECK(most == 0 || d.tokens <= most, "a draft length of ", d.tokens, " exceeds what the drafter proposes per ",
             "step (", most, ": its block)");
  return d;
}

void apply_draft_length(const DraftLength& resolved, GenerateOptions& o) {
  o.draft_tokens = resolved.tokens;
  o.draft_auto = resolved.automatic && resolved.tokens > 0;
}

}  // namespace dsv4

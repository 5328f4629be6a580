// A draft length as users give it: a fixed number of drafts per step (`--draft 3`, 0 = plain
// decoding), or `auto` — each step verifies what the verify scheduler finds worth verifying, up to
// the drafter's maximum (GenerateOptions::draft_auto).
#pragma once
#include <string>

namespace dsv4 {

class DraftProposer;
struct GenerateOptions;

struct DraftLength {
  int tokens = 0;          // fixed: drafts per step; automatic: 0 until resolved, then the maximum
  bool automatic = false;
};

// "auto", or an integer 0..15; throws naming `what` (the option or field) and the text otherwise.
DraftLength parse_draft_length(const std::string& text, const std::string& what = "--draft");
std::string draft_length_name(const DraftLength& d);  // "auto" or the number

// What commands and the server run with unless told otherwise: auto (plain decoding where the
// checkpoint has no drafter, or where drafting does not pay).
inline constexpr DraftLength kDefaultDraft{0, true};

// The most drafts `auto` verifies with a drafter that sets no maximum itself (the MTP's chain).
constexpr int kAutoMaxChainDrafts = 4;

// What a request for `d` runs with this proposer (null: no drafter, plain decoding): automatic
// resolves to the proposer's maximum; a fixed length beyond it throws.
DraftLength resolve_draft_length(const DraftLength& d, const DraftProposer* proposer);
// Sets o.draft_tokens and o.draft_auto.
void apply_draft_length(const DraftLength& resolved, GenerateOptions& o);

}  // namespace dsv4

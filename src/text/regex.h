// A compiled PCRE2 pattern with the matching semantics the tokenizer needs.
// Hugging Face compiles its split patterns with Oniguruma; PCRE2 in UTF + UCP mode
// supports the same constructs (Unicode properties, lookahead) with the same
// leftmost-first semantics. JIT-compiled when the platform allows it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dsv4::text {

class Regex {
 public:
  // Throws std::invalid_argument naming the pattern and PCRE2's message on a bad pattern.
  // Unless `native_unicode`, the Unicode classes the reference's engine defines
  // differently are first pinned to its definition (see unicode_classes.h).
  explicit Regex(std::string_view pattern, bool native_unicode = false);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // All non-overlapping matches in `subject` (which must be valid UTF-8), as byte
  // [begin, end) pairs, in the order Oniguruma's find_iter yields them: an empty match
  // right where the previous match ended is skipped by advancing one character.
  // The subject is the whole world for the pattern: lookarounds see nothing beyond it.
  void find_all(std::string_view subject, std::vector<std::pair<size_t, size_t>>& matches) const;

  // The first match at or after byte `start`, if any.
  std::optional<std::pair<size_t, size_t>> find_first(std::string_view subject, size_t start = 0) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Impl;
  std::string pattern_;
  std::unique_ptr<Impl> impl_;
};

// Escapes `literal` so that it matches itself as a pattern.
std::string regex_escape(std::string_view literal);

}  // namespace dsv4::text

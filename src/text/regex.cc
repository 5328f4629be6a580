#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/regex.h"

#include <pcre2.h>

#include <stdexcept>

#include "text/unicode_classes.h"
#include "text/utf8.h"

namespace dsv4::text {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) return "PCRE2 error " + std::to_string(code);
  return reinterpret_cast<const char*>(buffer);
}

// Per-thread matching state shared by every pattern: a match block and a JIT stack
// large enough for lookahead over long whitespace runs.
struct ThreadMatchState {
  pcre2_match_data* match_data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);

  ThreadMatchState() {
    if (!match_data || !context || !jit_stack) throw std::bad_alloc();
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(match_data);
  }
  ThreadMatchState(const ThreadMatchState&) = delete;
  ThreadMatchState& operator=(const ThreadMatchState&) = delete;
};

ThreadMatchState& thread_match_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view pattern, bool native_unicode) : pattern_(pattern), impl_(std::make_unique<Impl>()) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  const std::string compiled = native_unicode ? pattern_ : pin_unicode_classes(pattern_);
  // MULTILINE: Oniguruma's default syntax treats ^ and $ as line anchors.
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &error_code, &error_offset, nullptr);
  if (!impl_->code) {
    throw std::invalid_argument("invalid regex '" + pattern_ + "': " + pcre2_message(error_code) +
                                " (offset " + std::to_string(error_offset) + " of the compiled form)");
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

namespace {

// Runs one match attempt; returns false when there is no match.
bool match_once(pcre2_code* code, bool jit, std::string_view subject, size_t start, size_t& begin, size_t& end,
                const std::string& pattern) {
  ThreadMatchState& state = thread_match_state();
  const auto* data = reinterpret_cast<PCRE2_SPTR>(subject.data());
  // The subject was validated once by the caller; re-checking it on every call
  // would make matching quadratic in the length of the text.
  const int rc = jit ? pcre2_jit_match(code, data, subject.size(), start, 0, state.match_data, state.context)
                     : pcre2_match(code, data, subject.size(), start, PCRE2_NO_UTF_CHECK, state.match_data,
                                   state.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) throw std::runtime_error("regex '" + pattern + "' failed: " + pcre2_message(rc));
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.match_data);
  begin = ovector[0];
  end = ovector[1];
  return true;
}

}  // namespace

std::optional<std::pair<size_t, size_t>> Regex::find_first(std::string_view subject, size_t start) const {
  size_t begin = 0, end = 0;
  if (start > subject.size() || !match_once(impl_->code, impl_->jit, subject, start, begin, end, pattern_)) {
    return std::nullopt;
  }
  return std::make_pair(begin, end);
}

void Regex::find_all(std::string_view subject, std::vector<std::pair<size_t, size_t>>& matches) const {
  matches.clear();
  size_t start = 0;
  bool have_previous = false;
  size_t previous_end = 0;
  size_t begin = 0, end = 0;
  while (start <= subject.size() && match_once(impl_->code, impl_->jit, subject, start, begin, end, pattern_)) {
    if (begin == end && have_previous && previous_end == end) {
      if (start >= subject.size()) break;
      start += utf8_length_from_lead(static_cast<uint8_t>(subject[start]));
      continue;
    }
    matches.emplace_back(begin, end);
    start = end;
    previous_end = end;
    have_previous = true;
  }
}

std::string regex_escape(std::string_view literal) {
  // PCRE2 reads a backslash before any ASCII non-alphanumeric character as that
  // character itself, so escaping all of them is always safe.
  std::string out;
  out.reserve(literal.size() * 2);
  for (const char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    const bool alphanumeric = (u >= '0' && u <= '9') || (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z');
    if (u < 0x80 && !alphanumeric) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace dsv4::text

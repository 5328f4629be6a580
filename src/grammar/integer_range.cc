// Numbers with bounds (json_schema_detail.h). The decimal integers of a range, e.g. [-5, 123]:
//   "-" [1-5] | [0-9] | [1-9] [0-9] | "1" ( [0-1] [0-9] | "2" [0-3] )
// Ranges of non-negative numbers are split by digit count, then each same-length range by its
// first differing digit: the low end's digit followed by "its rest up to 99…9", the whole
// digits in between followed by anything, the high end's digit followed by "00…0 up to its
// rest". Negative numbers are "-" and the range of their magnitudes.
#include <algorithm>
#include <cmath>

#include "grammar/json_schema_detail.h"

namespace dsv4::grammar::detail {
namespace {

std::string digit_class(char lo, char hi) {
  if (lo == hi) return std::string("[") + lo + "]";
  return std::string("[") + lo + "-" + hi + "]";
}

std::string any_digits(size_t n) { return gbnf_repeat("[0-9]", int(n), int(n)); }

// `digits` (a literal) then expr, merging expr's leading literal: "1" "50" → "150".
std::string after_digits(std::string_view digits, const std::string& expr) {
  if (expr.size() > 1 && expr[0] == '"') return "\"" + std::string(digits) + expr.substr(1);
  return gbnf_literal(digits) + " " + expr;
}

bool all_of(std::string_view s, char c) { return std::all_of(s.begin(), s.end(), [c](char x) { return x == c; }); }

// Numbers of lo.size() digits from lo to hi (same length, lo ≤ hi; leading zeros allowed here:
// callers only pass a first digit ≥ 1 or the tail of a longer number).
std::string same_length(std::string_view lo, std::string_view hi) {
  size_t i = 0;
  while (i < lo.size() && lo[i] == hi[i]) ++i;
  if (i == lo.size()) return gbnf_literal(lo);
  const size_t rest = lo.size() - i - 1;
  std::vector<std::string> alts;
  if (rest == 0) {
    alts.push_back(digit_class(lo[i], hi[i]));
  } else {
    const std::string_view lo_rest = lo.substr(i + 1), hi_rest = hi.substr(i + 1);
    const bool lo_full = all_of(lo_rest, '0'), hi_full = all_of(hi_rest, '9');
    if (!lo_full) alts.push_back(after_digits(lo.substr(i, 1), same_length(lo_rest, std::string(rest, '9'))));
    const char first = lo_full ? lo[i] : char(lo[i] + 1), last = hi_full ? hi[i] : char(hi[i] - 1);
    if (first <= last) alts.push_back(digit_class(first, last) + " " + any_digits(rest));
    if (!hi_full) alts.push_back(after_digits(hi.substr(i, 1), same_length(std::string(rest, '0'), hi_rest)));
  }
  std::string body = alts.size() == 1 ? alts[0] : "(";
  if (alts.size() > 1) {
    for (size_t a = 0; a < alts.size(); ++a) body += (a ? " | " : " ") + alts[a];
    body += " )";
  }
  return i ? after_digits(lo.substr(0, i), body) : body;
}

uint64_t pow10(size_t n) {
  uint64_t p = 1;
  while (n--) p *= 10;
  return p;
}

// Alternatives for the non-negative integers in [lo, hi]. Whole digit counts in a row (all
// numbers of 2..16 digits, say) share one alternative: [1-9] [0-9]{1,15}.
void non_negative(uint64_t lo, uint64_t hi, std::vector<std::string>& alts) {
  const size_t lo_len = std::to_string(lo).size(), hi_len = std::to_string(hi).size();
  size_t whole_from = 0;  // first of a run of whole digit counts (0: none open)
  auto close_run = [&](size_t end) {  // the run ends before digit count `end`
    if (whole_from) alts.push_back("[1-9] " + gbnf_repeat("[0-9]", int(whole_from - 1), int(end - 2)));
    whole_from = 0;
  };
  for (size_t len = lo_len; len <= hi_len; ++len) {
    const uint64_t a = std::max(lo, len == 1 ? 0 : pow10(len - 1));
    const uint64_t b = std::min(hi, pow10(len) - 1);
    if (len > 1 && a == pow10(len - 1) && b == pow10(len) - 1) {
      if (!whole_from) whole_from = len;
      continue;
    }
    close_run(len);
    alts.push_back(same_length(std::to_string(a), std::to_string(b)));
  }
  close_run(hi_len + 1);
}

// |v| without overflow for v = INT64_MIN.
uint64_t magnitude(int64_t v) { return v < 0 ? uint64_t(-(v + 1)) + 1 : uint64_t(v); }

}  // namespace

std::string integer_range_gbnf(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (lo < 0) {
    std::vector<std::string> negative;
    non_negative(hi < 0 ? magnitude(hi) : 1, magnitude(lo), negative);
    std::string magnitudes = negative.size() == 1 ? negative[0] : "(";
    if (negative.size() > 1) {
      for (size_t a = 0; a < negative.size(); ++a) magnitudes += (a ? " | " : " ") + negative[a];
      magnitudes += " )";
    }
    alts.push_back("\"-\" " + magnitudes);
  }
  if (hi >= 0) non_negative(uint64_t(std::max<int64_t>(lo, 0)), uint64_t(hi), alts);
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t a = 0; a < alts.size(); ++a) out += (a ? " | " : " ") + alts[a];
  return out + " )";
}

// ---- bounds of integer and number schemas

namespace {

constexpr int64_t kIntLimit = 999'999'999'999'999'999;  // 10^18 - 1: the largest magnitude generated

int digit_count(int64_t v) {  // |v| < 2^63
  int n = 1;
  for (v = v < 0 ? -v : v; v >= 10; v /= 10) ++n;
  return n;
}

int64_t all_nines(int digits) {
  int64_t v = 0;
  while (digits--) v = v * 10 + 9;
  return v;
}

// floor(v) or ceil(v) of a bound, saturated to ±(kIntLimit + 1), which mean "beyond what is
// generated".
int64_t round_bound(const ojson& v, bool up) {
  constexpr int64_t kOut = kIntLimit + 1;
  if (v.is_number_unsigned()) return v.get<uint64_t>() > uint64_t(kIntLimit) ? kOut : v.get<int64_t>();
  if (v.is_number_integer()) return std::clamp<int64_t>(v.get<int64_t>(), -kOut, kOut);
  const double d = up ? std::ceil(v.get<double>()) : std::floor(v.get<double>());
  if (!(d > -1e18)) return -kOut;
  if (!(d < 1e18)) return kOut;
  return int64_t(d);
}

// Integer and decimal ranges allowed by the bounds: [lo, hi] for integers; for decimals
// "I.F" (value in [I, I + 1)), I in [pos_lo, pos_hi]; for "-I.F" (value in (-I - 1, -I]),
// I in [neg_lo, neg_hi]. Each keyword narrows them; all saturate at ±(kIntLimit + 1).
struct Ranges {
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  int64_t pos_lo = 0, pos_hi = INT64_MAX, neg_lo = 0, neg_hi = INT64_MAX;
};

Ranges number_ranges(const ojson& s, const std::string& where, bool* bounded) {
  Ranges r;
  auto dec = [](int64_t v) { return v == INT64_MIN ? v : v - 1; };
  auto inc = [](int64_t v) { return v == INT64_MAX ? v : v + 1; };
  auto draft4 = [&](const char* k) { return s.contains(k) && s[k].is_boolean() && s[k].get<bool>(); };
  for (const char* k : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    if (!s.contains(k) || s[k].is_boolean()) continue;  // draft-04 exclusive*: true is read with minimum / maximum
    const ojson& v = s[k];
    if (!v.is_number()) throw UnsupportedSchema(std::string("JSON Schema keyword '") + k + "' at " + at(where) + " must be a number");
    *bounded = true;
    const std::string key = k;
    const bool lower = key == "minimum" || key == "exclusiveMinimum";
    const bool exclusive = key.starts_with("exclusive") || draft4(lower ? "exclusiveMinimum" : "exclusiveMaximum");
    const int64_t fl = round_bound(v, false), ce = round_bound(v, true);
    if (lower) {  // x ≥ m (x > m)
      const int64_t lo = exclusive ? inc(fl) : ce;
      r.lo = std::max(r.lo, lo);
      r.pos_lo = std::max(r.pos_lo, lo);          // I.F ≥ I must satisfy the bound
      r.neg_hi = std::min(r.neg_hi, dec(-ce));    // -I.F > -I - 1 ≥ m: I ≤ -m - 1
    } else {      // x ≤ M (x < M)
      const int64_t hi = exclusive ? dec(ce) : fl;
      r.hi = std::min(r.hi, hi);
      r.pos_hi = std::min(r.pos_hi, dec(fl));      // I.F < I + 1 ≤ M: I ≤ M - 1
      r.neg_lo = std::max(r.neg_lo, -hi);          // -I.F ≤ -I must satisfy the bound
    }
  }
  return r;
}

}  // namespace

std::string bounded_number_gbnf(const ojson& s, const std::string& where, bool integer) {
  bool bounded = false;
  Ranges r = number_ranges(s, where, &bounded);
  if (!bounded) return "";
  // The generated magnitudes: at most 18 digits, on an open side 16 (or the bound's count).
  auto clip = [](int64_t& lo, int64_t& hi, int64_t open) {
    lo = lo == INT64_MIN ? -open : std::max(lo, -kIntLimit);
    hi = hi == INT64_MAX ? open : std::min(hi, kIntLimit);
  };
  const int digits = std::max({16, r.lo == INT64_MIN ? 0 : digit_count(r.lo), r.hi == INT64_MAX ? 0 : digit_count(r.hi)});
  const int64_t open = all_nines(std::min(digits, 18));
  clip(r.lo, r.hi, open);
  clip(r.pos_lo, r.pos_hi, open);
  clip(r.neg_lo, r.neg_hi, open);
  std::vector<std::string> alts;
  if (r.lo <= r.hi) alts.push_back(integer_range_gbnf(r.lo, r.hi));
  if (!integer) {
    const std::string fraction = R"( "." [0-9]{1,16})";
    if (r.pos_lo <= r.pos_hi) alts.push_back(integer_range_gbnf(std::max<int64_t>(r.pos_lo, 0), r.pos_hi) + fraction);
    if (r.neg_lo <= r.neg_hi) alts.push_back("\"-\" " + integer_range_gbnf(std::max<int64_t>(r.neg_lo, 0), r.neg_hi) + fraction);
  }
  if (alts.empty()) {
    std::string keywords;
    for (const char* k : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"})
      if (s.contains(k)) keywords += std::string(keywords.empty() ? "'" : ", '") + k + "'";
    throw UnsupportedSchema("JSON Schema keywords " + keywords + " at " + at(where) + ": no " +
                            (integer ? "integer" : "number of the generated forms (integers, I.F with I and I + 1 in range)") +
                            " of at most 18 digits is in range");
  }
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return out;
}

}  // namespace dsv4::grammar::detail

// JSON Schema → GBNF, numbers: integer ranges checked on every value around their bounds,
// exclusive and one-sided bounds, bounded numbers against an exact predicate, empty ranges.
#include <gtest/gtest.h>

#include <optional>

#include "grammar/json_schema.h"
#include "grammar/json_schema_test_util.h"

namespace dsv4::grammar::schema_test {
namespace {

// ---- numbers

// The accepted integers of a range schema, checked one by one around its bounds.
void check_integer_range(const std::string& schema, int64_t lo, int64_t hi, int64_t from, int64_t to) {
  SCOPED_TRACE(schema);
  std::string gbnf;
  ASSERT_NO_THROW(gbnf = json_schema_to_gbnf(ojson::parse(schema)));
  SCOPED_TRACE(gbnf);
  const Grammar g = parse_gbnf(gbnf);
  for (int64_t v = from; v <= to; ++v) EXPECT_EQ(grammar_accepts(g, std::to_string(v)), v >= lo && v <= hi) << v;
  // Far away, and spellings that are never valid.
  for (int64_t far : {int64_t(-1e15), int64_t(-123456789), int64_t(-1000000), int64_t(1000000), int64_t(123456789), int64_t(1e15)})
    EXPECT_EQ(grammar_accepts(g, std::to_string(far)), far >= lo && far <= hi) << far;
  for (const std::string bad : {"-0", "+1", "00", "01", "1.0", "1e2", ""})
    EXPECT_FALSE(grammar_accepts(g, bad)) << bad;  // ranges never spell zero "-0"
}

TEST(JsonSchemaNumbers, IntegerRangesAreExact) {
  const std::pair<int64_t, int64_t> ranges[] = {
      {0, 0},      {5, 5},     {-5, -5},   {0, 9},     {0, 10},     {1, 9},     {3, 7},      {-9, 9},     {-10, 10},
      {-1, 1},     {0, 99},    {0, 100},   {10, 99},   {9, 10},     {19, 21},   {99, 101},   {100, 999},  {101, 998},
      {123, 456},  {0, 150},   {17, 1234}, {-17, 1234}, {-1234, -17}, {-100, -1}, {-999, 999}, {-1000, 0}, {989, 1011},
      {1, 1000},   {1999, 2001}, {-45, 0}, {0, 1099},  {100, 199},  {-205, -195}, {37, 4321},
  };
  for (const auto& [lo, hi] : ranges) {
    const std::string schema = ojson{{"type", "integer"}, {"minimum", lo}, {"maximum", hi}}.dump();
    check_integer_range(schema, lo, hi, lo - 30, hi + 30);
  }
}

TEST(JsonSchemaNumbers, ExclusiveAndOneSidedBounds) {
  check_integer_range(R"({"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":12})", -2, 11, -40, 50);
  check_integer_range(R"({"type":"integer","exclusiveMinimum":9,"maximum":100})", 10, 100, -30, 140);
  check_integer_range(R"({"type":"integer","minimum":-10,"exclusiveMaximum":0})", -10, -1, -50, 40);
  check_integer_range(R"({"type":"integer","minimum":0})", 0, INT64_MAX, -40, 140);
  check_integer_range(R"({"type":"integer","minimum":1})", 1, INT64_MAX, -40, 140);
  check_integer_range(R"({"type":"integer","minimum":-7})", -7, INT64_MAX, -40, 140);
  check_integer_range(R"({"type":"integer","minimum":95})", 95, INT64_MAX, 60, 1030);
  check_integer_range(R"({"type":"integer","exclusiveMinimum":999})", 1000, INT64_MAX, 960, 1040);
  check_integer_range(R"({"type":"integer","maximum":0})", INT64_MIN, 0, -140, 40);
  check_integer_range(R"({"type":"integer","maximum":-1})", INT64_MIN, -1, -140, 40);
  check_integer_range(R"({"type":"integer","maximum":37})", INT64_MIN, 37, -140, 140);
  check_integer_range(R"({"type":"integer","exclusiveMaximum":-99})", INT64_MIN, -100, -1040, 40);
  // Fractional bounds: the integers inside.
  check_integer_range(R"({"type":"integer","minimum":-2.5,"maximum":3.5})", -2, 3, -40, 40);
  check_integer_range(R"({"type":"integer","exclusiveMinimum":1.5,"exclusiveMaximum":4.0})", 2, 3, -40, 40);
  // Draft-04 boolean exclusives.
  check_integer_range(R"({"type":"integer","minimum":3,"exclusiveMinimum":true,"maximum":9,"exclusiveMaximum":true})", 4, 8, -30, 40);
  // Huge bounds: the open side is up to 16 digits, a longer bound keeps its length.
  const Grammar g = compile(R"({"type":"integer","minimum":-5})");
  EXPECT_TRUE(grammar_accepts(g, "9999999999999999"));
  EXPECT_FALSE(grammar_accepts(g, "-6"));
  const Grammar big = compile(R"({"type":"integer","minimum":100000000000000000})");
  EXPECT_TRUE(grammar_accepts(big, "100000000000000000"));
  EXPECT_TRUE(grammar_accepts(big, "999999999999999999"));
  EXPECT_FALSE(grammar_accepts(big, "99999999999999999"));
  const Grammar wide = compile(R"({"type":"integer","minimum":-1e300,"maximum":1e300})");
  EXPECT_TRUE(grammar_accepts(wide, "-9999999999999999"));
  EXPECT_TRUE(grammar_accepts(wide, "0"));
}

// A bound in hundredths (exact for the decimals used here) and whether it is exclusive.
struct Bound {
  int64_t hundredths;
  bool exclusive;
};

std::string hundredths_text(int64_t h) {
  const int64_t a = h < 0 ? -h : h;
  std::string s = (h < 0 ? "-" : "") + std::to_string(a / 100);
  if (a % 100) s += (a % 100 < 10 ? ".0" : ".") + std::to_string(a % 100);
  return s;
}

// A number schema with bounds accepts exactly: the integers in range, and the decimals I.F
// (-I.F) whose whole interval [I, I + 1) ((-I - 1, -I]) is in range.
void check_number_range(std::optional<Bound> lo, std::optional<Bound> hi) {
  ojson schema = {{"type", "number"}};
  auto value = [](int64_t h) { return h % 100 ? ojson(double(h) / 100) : ojson(h / 100); };
  if (lo) schema[lo->exclusive ? "exclusiveMinimum" : "minimum"] = value(lo->hundredths);
  if (hi) schema[hi->exclusive ? "exclusiveMaximum" : "maximum"] = value(hi->hundredths);
  SCOPED_TRACE(schema.dump());
  const std::string gbnf = json_schema_to_gbnf(schema);
  SCOPED_TRACE(gbnf);
  const Grammar g = parse_gbnf(gbnf);
  auto valid = [&](int64_t h) {
    return (!lo || (lo->exclusive ? h > lo->hundredths : h >= lo->hundredths)) &&
           (!hi || (hi->exclusive ? h < hi->hundredths : h <= hi->hundredths));
  };
  const int64_t from = (lo ? lo->hundredths : hi->hundredths - 1000) / 100 * 100 - 400;
  const int64_t to = (hi ? hi->hundredths : lo->hundredths + 1000) / 100 * 100 + 400;
  for (int64_t whole = from; whole <= to; whole += 100) {
    EXPECT_EQ(grammar_accepts(g, hundredths_text(whole)), valid(whole)) << hundredths_text(whole);
    const int64_t i = (whole < 0 ? -whole : whole) / 100;  // I of I.F / -I.F
    for (int64_t f : {0, 1, 25, 50, 99}) {
      const std::string dec = (whole < 0 ? "-" : "") + std::to_string(i) + "." + (f < 10 ? "0" : "") + std::to_string(f);
      const bool expected = whole >= 0 ? valid(i * 100) && valid(i * 100 + 99) && (!hi || (i + 1) * 100 <= hi->hundredths)
                                       : valid(-i * 100) && (!lo || -(i + 1) * 100 >= lo->hundredths);
      EXPECT_EQ(grammar_accepts(g, dec), expected) << dec;
      if (whole == 0) {  // -0.F
        const bool neg = valid(0) && (!lo || -100 >= lo->hundredths);
        EXPECT_EQ(grammar_accepts(g, "-" + dec), neg) << "-" << dec;
      }
    }
  }
  for (const char* bad : {"1e2", "1.", ".5", "+1", "01"}) EXPECT_FALSE(grammar_accepts(g, bad)) << bad;
}

TEST(JsonSchemaNumbers, NumberBoundsGenerateIntegersAndWholeIntervalDecimals) {
  for (bool lx : {false, true})
    for (bool hx : {false, true}) {
      check_number_range(Bound{0, lx}, Bound{1000, hx});
      check_number_range(Bound{-250, lx}, Bound{250, hx});
      check_number_range(Bound{-1000, lx}, Bound{-300, hx});
      check_number_range(Bound{50, lx}, Bound{2050, hx});
      check_number_range(Bound{-199, lx}, Bound{101, hx});
      check_number_range(Bound{0, lx}, std::nullopt);
      check_number_range(Bound{-350, lx}, std::nullopt);
      check_number_range(std::nullopt, Bound{100, hx});
      check_number_range(std::nullopt, Bound{-75, hx});
    }
  // The generated decimals are bounded in length; bounds far out do not limit the open side.
  const Grammar g = compile(R"({"type":"number","minimum":0})");
  EXPECT_TRUE(grammar_accepts(g, "1234567890123456.1234567890123456"));
  EXPECT_FALSE(grammar_accepts(g, "1.12345678901234567"));
  EXPECT_FALSE(grammar_accepts(g, "-0.5"));
}

TEST(JsonSchemaNumbers, EmptyRangesAreErrors) {
  EXPECT_NE(error_of(R"({"type":"integer","minimum":5,"maximum":4})").find("'maximum'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"integer","exclusiveMinimum":4,"exclusiveMaximum":5})").find("no integer"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"number","minimum":0.2,"maximum":0.8})").find("integer"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"integer","minimum":"1"})").find("'minimum'"), std::string::npos);
}


}  // namespace
}  // namespace dsv4::grammar::schema_test

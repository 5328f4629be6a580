// JSON Schema → GBNF: for each supported keyword, valid instances are accepted (compact, spaced
// and pretty-printed) and invalid ones rejected through the real GBNF compiler and matcher;
// integer ranges, patterns and dates are checked exhaustively against reference predicates;
// unsupported keywords throw UnsupportedSchema naming them.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <regex>
#include <set>

#include "grammar/json_schema.h"
#include "grammar/json_schema_test_util.h"

namespace dsv4::grammar::schema_test {
namespace {

// ---- types

TEST(JsonSchemaTypes, Primitives) {
  check(R"({"type":"string"})", {R"("")", R"("abc")", R"("a b")", R"("é😀")", R"("a\"b\\c\/d\b\f\n\r\t")", R"("\u00e9\uD83D\uDE00")"},
        {"abc", R"("a)", R"("a"b")", "\"a\nb\"", "\"a\tb\"", std::string("\"a\x01\""), R"("\q")", R"("\u12")", R"("\u12G4")", "1", "null"});
  check(R"({"type":"boolean"})", {"true", "false"}, {"True", "1", "\"true\"", "null", "tru"});
  check(R"({"type":"null"})", {"null"}, {"Null", "0", "\"null\"", "nul"});
  check(R"({"type":"integer"})", {"0", "-0", "7", "-7", "1234567890123456", "-1234567890123456"},
        {"01", "1.0", "1e3", "+1", "-", "", "12345678901234567", "\"1\""});
  check(R"({"type":"number"})",
        {"0", "-0", "1.5", "-0.25", "1e10", "1E+3", "-1.5e-3", "123456.789", "0.0001"},
        {"01", "1.", ".5", "+1", "1e", "1e+", "NaN", "Infinity", "-", "--1", "0x10", "1.5.2", "\"1\""});
  check(R"({"type":["string","null"]})", {R"("x")", "null"}, {"1", "true"});
  check(R"({"type":["integer","boolean"]})", {"3", "true"}, {"3.5", "null"});
}

TEST(JsonSchemaTypes, AnyValue) {
  const std::vector<std::string> values = {"null", "true", "false", "0", "-1.5e3", R"("s")", "[]", "{}",
                                           R"({"a":[1,{"b":null}],"c":"d"})", R"([1,"two",[3],{"four":4}])"};
  const std::vector<std::string> non_json = {"", "nul", "{", "[1,]", R"({"a"})", R"({"a":1,})", "{a:1}", "'s'", "[1 2]", "01"};
  for (const char* schema : {"{}", "true", R"({"description":"anything","title":"t","$comment":"c","default":1,"examples":[1]})"})
    check(schema, values, non_json);
}

TEST(JsonSchemaTypes, FalseAndEmptyTypeListAreErrors) {
  EXPECT_NE(error_of("false").find("'false'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":[]})").find("'type'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"float"})").find("float"), std::string::npos);
  EXPECT_NE(error_of("[]").find("neither"), std::string::npos);
}

TEST(JsonSchemaTypes, TypeInferredFromKeywords) {
  check(R"({"properties":{"a":{"type":"integer"}},"required":["a"]})", {R"({"a":1})"}, {"1", R"({})", R"("a")"});
  check(R"({"minLength":2})", {R"("ab")"}, {R"("a")", "12"});
  check(R"({"items":{"type":"null"}})", {"[]", "[null]"}, {"[1]", "null"});
}

// ---- strings

TEST(JsonSchemaStrings, LengthCountsCharactersNotBytes) {
  check(R"({"type":"string","minLength":2,"maxLength":3})",
        {R"("ab")", R"("abc")", R"("éé")", R"("😀😀😀")", R"("\n\"")", R"("a\u00e9b")", R"("\\\\\\")"},
        {R"("")", R"("a")", R"("é")", R"("abcd")", R"("\n")", R"("ab\u00e9c")", R"("😀😀😀😀")"});
  check(R"({"type":"string","maxLength":0})", {R"("")"}, {R"("a")"});
  check(R"({"type":"string","minLength":5})", {R"("abcde")", R"("abcdefghijklmnop")"}, {R"("abcd")", R"("")"});
  check(R"({"type":"string","maxLength":1})", {R"("")", R"("x")", R"("\t")"}, {R"("xy")"});
  EXPECT_NE(error_of(R"({"type":"string","minLength":3,"maxLength":2})").find("'maxLength'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","minLength":-1})").find("'minLength'"), std::string::npos);
}

TEST(JsonSchemaStrings, EnumAndConst) {
  check(R"({"enum":["red","green","blue"]})", {R"("red")", R"("green")", R"("blue")"},
        {R"("Red")", R"("gree")", R"("greenish")", "red", R"("")"});
  check(R"({"type":"string","enum":["a\"b","c\\d","é","x\ny"]})", {R"("a\"b")", R"("c\\d")", R"("é")", R"("x\ny")"},
        {R"("a"b")", R"("x\u000ay")"});
  check(R"({"const":"fixed"})", {R"("fixed")"}, {R"("fixe")", R"("fixed2")"});
  // Arrays and objects among the values: their compact serialization only.
  check(R"({"enum":[1,"1",null,true,[1,2],{"a":1,"b":[]}]})", {"1", R"("1")", "null", "true", "[1,2]", R"({"a":1,"b":[]})"},
        {"2", "false", "[1]", R"({"a":2,"b":[]})", R"({"b":[],"a":1})"}, /*layouts=*/false);
  // `type` filters the values.
  check(R"({"type":"string","enum":["a",1,null]})", {R"("a")"}, {"1", "null"});
  check(R"({"type":"integer","enum":[1,2.0,2.5,"3"]})", {"1", "2.0"}, {"2.5", R"("3")"});
  check(R"({"const":1.5,"enum":[1.5,2]})", {"1.5"}, {"2"});
  EXPECT_NE(error_of(R"({"type":"string","enum":[1,2]})").find("'enum'"), std::string::npos);
  EXPECT_NE(error_of(R"({"enum":["a"],"maxLength":3})").find("'maxLength'"), std::string::npos);
  EXPECT_NE(error_of(R"({"enum":"a"})").find("'enum'"), std::string::npos);
}

// ---- formats

TEST(JsonSchemaFormats, DateIsExactIncludingLeapYears) {
  const Grammar g = compile(R"({"type":"string","format":"date"})");
  using namespace std::chrono;
  for (int y : {1900, 1996, 2000, 2023, 2024, 2100, 2400})
    for (unsigned m = 0; m <= 13; ++m)
      for (unsigned d = 0; d <= 32; ++d) {
        char text[32];
        std::snprintf(text, sizeof text, "\"%04d-%02u-%02u\"", y, m, d);
        const bool ok = year_month_day(year(y), month(m), day(d)).ok();
        EXPECT_EQ(grammar_accepts(g, text), ok) << text;
      }
  for (const char* bad : {R"("2024-1-05")", R"("24-01-05")", R"("2024/01/05")", R"("2024-01-05T00:00:00Z")", "2024-01-05"})
    EXPECT_FALSE(grammar_accepts(g, bad)) << bad;
}

TEST(JsonSchemaFormats, TimeDateTimeUuidEmailIpv4) {
  check(R"({"type":"string","format":"time"})", {R"("00:00:00Z")", R"("23:59:59.123+05:30")", R"("12:30:00-08:00")", R"("01:02:03.5Z")"},
        {R"("24:00:00Z")", R"("12:60:00Z")", R"("12:00:60Z")", R"("12:00:00")", R"("12:00Z")", R"("12:00:00+5:00")", R"("12:00:00.Z")"});
  check(R"({"type":"string","format":"date-time"})", {R"("2024-02-29T23:59:59Z")", R"("1999-12-31T00:00:00.000001+01:00")"},
        {R"("2023-02-29T00:00:00Z")", R"("2024-01-01 00:00:00Z")", R"("2024-01-01T00:00:00")", R"("2024-01-01")"});
  check(R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")", R"("ABCDEF01-2345-6789-ABCD-EF0123456789")"},
        {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400")", R"("g23e4567-e89b-12d3-a456-426614174000")"});
  check(R"({"type":"string","format":"email"})", {R"("a@b.co")", R"("john.doe+tag@mail.example.org")", R"("x_y-z@sub-domain.example.com")"},
        {R"("a@b")", R"("@b.co")", R"("a@.co")", R"("a b@c.de")", R"("a@b.c")", R"("a..b@c.de")", R"(".a@b.co")", R"("a@-b.co")"});
  check(R"({"type":"string","format":"ipv4"})", {R"("0.0.0.0")", R"("192.168.1.255")", R"("255.255.255.255")", R"("10.0.0.1")"},
        {R"("256.0.0.1")", R"("1.2.3")", R"("01.2.3.4")", R"("1.2.3.4.5")", R"("1.2.3.-4")"});
  EXPECT_NE(error_of(R"({"type":"string","format":"hostname"})").find("'format'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","format":"date","maxLength":20})").find("'maxLength'"), std::string::npos);
}

// ---- patterns

TEST(JsonSchemaPatterns, AnchoredAndUnanchored) {
  check(R"({"type":"string","pattern":"^[a-z]+(-[a-z]+)*$"})", {R"("abc")", R"("a-b-c")"}, {R"("")", R"("a-")", R"("-a")", R"("aB")", R"("a--b")"});
  // Unanchored: the pattern may occur anywhere.
  check(R"({"type":"string","pattern":"ab+c"})", {R"("abc")", R"("xxabbbcyy")", R"("\"abc\n")"}, {R"("ac")", R"("abx")", R"("")"});
  check(R"({"type":"string","pattern":"^ab"})", {R"("ab")", R"("abzz")"}, {R"("zab")"});
  check(R"({"type":"string","pattern":"ab$"})", {R"("ab")", R"("zzab")"}, {R"("abz")"});
  check(R"({"type":"string","pattern":"^a|b$"})", {R"("a")", R"("axx")", R"("xxb")"}, {R"("xa")", R"("bx")"});
  check(R"({"type":"string","pattern":""})", {R"("")", R"("anything")"}, {"1"});
  check(R"({"type":"string","pattern":"^$"})", {R"("")"}, {R"("a")"});
}

TEST(JsonSchemaPatterns, SyntaxSubset) {
  check(R"({"type":"string","pattern":"^\\d{3}-\\d{4}$"})", {R"("555-1234")"}, {R"("55-1234")", R"("555-12345")", R"("abc-defg")"});
  check(R"({"type":"string","pattern":"^\\w+@\\w+\\.com$"})", {R"("a_1@b2.com")"}, {R"("a@b.org")", R"("a@bxcom")"});
  check(R"({"type":"string","pattern":"^(?:ab|cd){2}x?$"})", {R"("abcd")", R"("cdcdx")"}, {R"("ab")", R"("abcdxx")"});
  check(R"({"type":"string","pattern":"^(?<word>[A-Z][a-z]*) (?P<n>[0-9]{1,3})$"})", {R"("Hello 42")", R"("X 1")"}, {R"("hello 42")", R"("X 1234")"});
  check(R"({"type":"string","pattern":"^[^a-c]{2,}$"})", {R"("xy")", R"("dé😀")", R"("\n\"")"}, {R"("ax")", R"("x")"});
  check(R"({"type":"string","pattern":"^a.c$"})", {R"("abc")", R"("a c")", R"("aéc")", R"("a\"c")", R"("a\tc")"}, {R"("a\nc")", R"("a\rc")", R"("ac")"});
  check(R"({"type":"string","pattern":"^\\.\\*\\\\\\[\\]\\(\\)\\{\\}\\^\\$\\|\\?\\+\\/$"})", {R"(".*\\[](){}^$|?+/")"}, {R"("x")"});
  check(R"({"type":"string","pattern":"^[\\d\\s-]+$"})", {R"("1 2-3")", R"("\t\n")"}, {R"("a")"});
  check(R"({"type":"string","pattern":"^\\x41\\u00e9\\u{1F600}\\t$"})", {R"("Aé😀\t")"}, {R"("A")"});
  check(R"({"type":"string","pattern":"^a{2}b{1,}c{0,2}d*?$"})", {R"("aab")", R"("aabbbccdd")"}, {R"("ab")", R"("aabccc")"});
  check(R"({"type":"string","pattern":"^x{$"})", {R"("x{")"}, {R"("x")"});
  // Repetition of what can match nothing is rewritten (the matcher would refuse it).
  check(R"({"type":"string","pattern":"^(a*)*$"})", {R"("")", R"("aaa")"}, {R"("b")"});
  check(R"({"type":"string","pattern":"^(a?b?)+c$"})", {R"("c")", R"("abac")", R"("bbc")"}, {R"("ca")"});
  check(R"({"type":"string","pattern":"^(|x)*$"})", {R"("")", R"("xx")"}, {R"("y")"});
  check(R"({"type":"string","pattern":"^(){3}z$"})", {R"("z")"}, {R"("zz")"});
}

TEST(JsonSchemaPatterns, AgreeWithStdRegexOnAllShortStrings) {
  // ASCII only: there the subset choices (ASCII \d \w \s) agree with ECMAScript.
  const std::vector<std::string> patterns = {
      "^a*b?$", "ab|ba", "^(ab|a)(bc|c)$", "a.b", "^[ab\"]{1,3}$", "^[^a]*$", "^(a|b)*a(a|b){2}$", "\\d", "^\\D+$",
      "^\\w\\W$", "^a{2,}$", "b{0}", "^(?:a|\\\\)+$", "^(a+)+b$", "^(a*b*)*$", "x|^a", "\"", "^[a-b\\\\]*$", "^\\s*$",
      "^(a|)+$", "b$|^b", "^.?.?$"};
  const std::string alphabet = "ab1 \"\\";
  std::vector<std::string> inputs = {""};
  for (size_t len = 1, begin = 0; len <= 4; ++len) {
    const size_t end = inputs.size();
    for (size_t i = begin; i < end; ++i)
      for (char c : alphabet) inputs.push_back(inputs[i] + c);
    begin = end;
  }
  for (const std::string& p : patterns) {
    SCOPED_TRACE(p);
    const Grammar g = compile(ojson{{"type", "string"}, {"pattern", p}}.dump());
    const std::regex re(p, std::regex::ECMAScript);
    for (const std::string& s : inputs) {
      const std::string text = ojson(s).dump();
      EXPECT_EQ(grammar_accepts(g, text), std::regex_search(s, re)) << "string " << text;
    }
  }
}

TEST(JsonSchemaPatterns, UnsupportedConstructsNameThemselves) {
  const std::pair<const char*, const char*> cases[] = {
      {"(a)\\1", "backreference"}, {"a(?=b)", "lookahead"}, {"(?<=a)b", "lookbehind"}, {"\\bword", "word boundary"},
      {"(?i)abc", "inline flags"}, {"\\p{L}", "Unicode property"}, {"a*+", "possessive"}, {"a^b", "'^'"},
      {"a$b", "'$'"}, {"(ab", "missing ')'"}, {"ab)", "unmatched ')'"}, {"[ab", "missing ']'"}, {"*a", "nothing to repeat"},
      {"a**", "quantifier after a quantifier"}, {"a{3,2}", "max < min"}, {"[[:alpha:]]", "POSIX"}, {"\\k<x>", "backreference"},
  };
  for (const auto& [pattern, what] : cases) {
    const std::string e = error_of(ojson{{"type", "string"}, {"pattern", pattern}}.dump());
    EXPECT_NE(e.find("'pattern'"), std::string::npos) << pattern << ": " << e;
    EXPECT_NE(e.find(what), std::string::npos) << pattern << ": " << e;
  }
  EXPECT_NE(error_of(R"j({"properties":{"a":{"pattern":"(?!x)"}}})j").find("/properties/a/pattern"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","pattern":"a","minLength":1})").find("'minLength'"), std::string::npos);
}

// ---- objects

TEST(JsonSchemaObjects, RequiredAndOptionalInOrder) {
  const std::string schema = R"({"type":"object","properties":{
      "a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"},"d":{"type":"null"}},
      "required":["b","d"]})";
  check(schema,
        {R"({"b":"x","d":null})", R"({"a":1,"b":"x","d":null})", R"({"b":"x","c":true,"d":null})", R"({"a":1,"b":"","c":false,"d":null})"},
        {R"({})", R"({"a":1})", R"({"b":"x"})", R"({"d":null,"b":"x"})", R"({"b":"x","d":null,"a":1})", R"({"b":"x",,"d":null})",
         R"({,"b":"x","d":null})", R"({"b":"x","d":null,})", R"({"b":1,"d":null})", R"({"b":"x","d":null,"e":1})", "[]"});
}

TEST(JsonSchemaObjects, EverySubsetOfOptionalPropertiesWithCorrectCommas) {
  const std::vector<std::string> names = {"p", "q", "r", "s"};
  for (int required_mask = 0; required_mask < 16; ++required_mask) {
    ojson schema = {{"type", "object"}, {"properties", ojson::object()}, {"required", ojson::array()}};
    for (size_t i = 0; i < names.size(); ++i) {
      schema["properties"][names[i]] = {{"type", "integer"}};
      if (required_mask >> i & 1) schema["required"].push_back(names[i]);
    }
    SCOPED_TRACE(schema.dump());
    const Grammar g = compile(schema.dump());
    for (int present = 0; present < 16; ++present) {
      std::string text = "{", spaced_text = "{ ";
      for (size_t i = 0; i < names.size(); ++i) {
        if (!(present >> i & 1)) continue;
        text += (text.size() > 1 ? "," : "") + ("\"" + names[i] + "\":" + std::to_string(i));
        spaced_text += (spaced_text.size() > 2 ? ", " : "") + ("\"" + names[i] + "\": " + std::to_string(i));
      }
      text += "}";
      spaced_text += present ? " }" : "}";
      const bool valid = (present & required_mask) == required_mask;
      EXPECT_EQ(grammar_accepts(g, text), valid) << text;
      EXPECT_EQ(grammar_accepts(g, spaced_text), valid) << spaced_text;
      if (present) {  // a stray comma
        EXPECT_FALSE(grammar_accepts(g, text.substr(0, text.size() - 1) + ",}")) << text;
        EXPECT_FALSE(grammar_accepts(g, "{," + text.substr(1))) << text;
      }
    }
  }
}

TEST(JsonSchemaObjects, AdditionalProperties) {
  // false: only the declared ones (and {} without any).
  check(R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false})", {"{}", R"({"a":1})"},
        {R"({"b":1})", R"({"a":1,"b":2})"});
  check(R"({"type":"object","additionalProperties":false})", {"{}"}, {R"({"a":1})"});
  // absent / true with properties: only declared ones are generated.
  check(R"({"type":"object","properties":{"a":{"type":"integer"}}})", {"{}", R"({"a":1})"}, {R"({"b":1})"});
  // no properties: any object.
  for (const char* s : {R"({"type":"object"})", R"({"type":"object","additionalProperties":true})"})
    check(s, {"{}", R"({"x":1,"y":[true,null],"z":{"w":"v"}})", R"({"a":1,"a":2})"}, {"[]", "null", R"({"x"})", R"({"x":})"});
  // a schema: a map.
  check(R"({"type":"object","additionalProperties":{"type":"integer","minimum":0}})", {"{}", R"({"a":1})", R"({"a":1,"b b":22,"\"":3})"},
        {R"({"a":-1})", R"({"a":"1"})", R"({"a":1,})", R"({1:1})"});
  // A required name missing from properties takes the additionalProperties schema.
  check(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["z"],"additionalProperties":{"type":"string"}})",
        {R"({"z":"s"})", R"({"a":1,"z":"s"})"}, {"{}", R"({"z":1})"});
  check(R"({"type":"object","required":["id"]})", {R"({"id":[1,{"x":null}]})"}, {"{}"});
  EXPECT_NE(error_of(R"({"type":"object","required":["z"],"additionalProperties":false})").find("'z'"), std::string::npos);
}

TEST(JsonSchemaObjects, KeysAreEscapedJsonStrings) {
  check(R"({"type":"object","properties":{"say \"hi\"":{"type":"integer"},"back\\slash":{"type":"integer"},"é/😀":{"type":"integer"},"":{"type":"integer"}},
        "required":["say \"hi\"","back\\slash","é/😀",""]})",
        {R"({"say \"hi\"":1,"back\\slash":2,"é/😀":3,"":4})"}, {R"({"say "hi"":1,"back\\slash":2,"é/😀":3,"":4})"});
}

TEST(JsonSchemaObjects, PropertyOrderFollowsTheSchemaWithOrderedJson) {
  const std::string schema = R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"integer"}},"required":["zeta","alpha"]})";
  const Grammar ordered = parse_gbnf(json_schema_to_gbnf(ojson::parse(schema)));
  EXPECT_TRUE(grammar_accepts(ordered, R"({"zeta":1,"alpha":2})"));
  EXPECT_FALSE(grammar_accepts(ordered, R"({"alpha":2,"zeta":1})"));
  // nlohmann::json sorts keys: alphabetical order.
  const Grammar sorted = parse_gbnf(json_schema_to_gbnf(nlohmann::json::parse(schema)));
  EXPECT_TRUE(grammar_accepts(sorted, R"({"alpha":2,"zeta":1})"));
}

TEST(JsonSchemaObjects, Nested) {
  check(R"({"type":"object","properties":{"user":{"type":"object","properties":{"name":{"type":"string"},
          "emails":{"type":"array","items":{"type":"string","format":"email"},"maxItems":2}},"required":["name"]}},"required":["user"]})",
        {R"({"user":{"name":"n"}})", R"({"user":{"name":"n","emails":["a@b.cd","e@f.gh"]}})"},
        {R"({"user":{}})", R"({"user":{"name":"n","emails":["a@b.cd","e@f.gh","i@j.kl"]}})", R"({"user":{"name":"n","emails":["x"]}})"});
}

// ---- arrays

TEST(JsonSchemaArrays, ItemsAndCounts) {
  check(R"({"type":"array","items":{"type":"integer"}})", {"[]", "[1]", "[1,2,3]"}, {"[1,]", "[,1]", "[1 2]", R"(["1"])", "[", "1"});
  check(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})", {"[1,2]", "[1,2,3]"}, {"[]", "[1]", "[1,2,3,4]"});
  check(R"({"type":"array","minItems":1})", {"[1]", R"([null,"x",{}])"}, {"[]"});
  check(R"({"type":"array","maxItems":0})", {"[]"}, {"[1]"});
  check(R"({"type":"array","items":{"type":"boolean"},"minItems":3})", {"[true,true,false]", "[true,true,true,true]"}, {"[true,true]"});
  check(R"({"type":"array","items":{"type":"array","items":{"type":"integer"},"maxItems":1}})", {"[]", "[[],[1]]"}, {"[[1,2]]"});
  check(R"({"type":"array","items":false})", {"[]"}, {"[1]"});
  check(R"({"type":"array","uniqueItems":false,"items":{"type":"null"}})", {"[null,null]"}, {"[1]"});
  EXPECT_NE(error_of(R"({"type":"array","minItems":3,"maxItems":2})").find("'maxItems'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"array","items":[{"type":"integer"}]})").find("'items'"), std::string::npos);
}

TEST(JsonSchemaArrays, PrefixItems) {
  // With items: the tuple, then more items.
  check(R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":{"type":"boolean"}})",
        {"[]", "[1]", R"([1,"a"])", R"([1,"a",true,false])"}, {R"(["a"])", R"([1,2])", R"([1,"a",3])"});
  // Without items: the prefix only; minItems asks for the full tuple.
  check(R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"minItems":2})", {R"([1,"a"])"},
        {"[1]", R"([1,"a",true])"});
  check(R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string"},{"type":"null"}],"minItems":1,"maxItems":2})",
        {"[1]", R"([1,"a"])"}, {"[]", R"([1,"a",null])"});
  // minItems beyond the prefix without items: any values fill up.
  check(R"({"type":"array","prefixItems":[{"type":"integer"}],"minItems":3})", {R"([1,"x",null])", "[1,2,3,4]"}, {"[1,2]", R"(["x",1,2])"});
  check(R"({"type":"array","prefixItems":[{"const":"a"}],"items":false,"minItems":1})", {R"(["a"])"}, {R"(["a","a"])", "[]"});
  EXPECT_NE(error_of(R"({"type":"array","prefixItems":[{}],"items":false,"minItems":2})").find("'minItems'"), std::string::npos);
}

// ---- combinations

TEST(JsonSchemaCombinations, AnyOfAndOneOf) {
  check(R"({"anyOf":[{"type":"integer","minimum":10},{"type":"string","maxLength":1},{"type":"null"}]})", {"10", "99", R"("a")", "null"},
        {"9", R"("ab")", "true"});
  check(R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind","x"]},
                     {"type":"object","properties":{"kind":{"const":"b"},"y":{"type":"string"}},"required":["kind","y"]}]})",
        {R"({"kind":"a","x":1})", R"({"kind":"b","y":"s"})"}, {R"({"kind":"a","y":"s"})", R"({"kind":"c","x":1})"});
  // A pydantic discriminated union ("discriminator" is an annotation: the consts decide).
  check(R"({"$defs":{"Cat":{"type":"object","properties":{"pet_type":{"const":"cat","type":"string"},"meows":{"type":"integer"}},
                            "required":["pet_type","meows"],"title":"Cat"},
                     "Dog":{"type":"object","properties":{"pet_type":{"const":"dog","type":"string"},"barks":{"type":"number"}},
                            "required":["pet_type","barks"],"title":"Dog"}},
            "oneOf":[{"$ref":"#/$defs/Cat"},{"$ref":"#/$defs/Dog"}],
            "discriminator":{"propertyName":"pet_type","mapping":{"cat":"#/$defs/Cat","dog":"#/$defs/Dog"}}})",
        {R"({"pet_type":"cat","meows":3})", R"({"pet_type":"dog","barks":0.5})"}, {R"({"pet_type":"cat","barks":1})", R"({"pet_type":"bird"})"});
  // Sibling keywords apply to each branch.
  check(R"({"type":"string","anyOf":[{"minLength":3},{"format":"date"}]})", {R"("abc")", R"("2020-01-01")"}, {R"("ab")", "123"});
  EXPECT_NE(error_of(R"({"anyOf":[]})").find("'anyOf'"), std::string::npos);
}

TEST(JsonSchemaCombinations, AllOf) {
  check(R"({"allOf":[{"type":"integer","minimum":0}]})", {"0", "5"}, {"-1"});
  check(R"({"allOf":[{"type":"integer","minimum":0},{"maximum":10}]})", {"0", "10"}, {"-1", "11"});
  check(R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
                     {"properties":{"b":{"type":"string"}},"required":["b"]}]})",
        {R"({"a":1,"b":"x"})"}, {R"({"a":1})", R"({"b":"x"})"});
  check(R"({"$defs":{"base":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}},
            "allOf":[{"$ref":"#/$defs/base"},{"properties":{"name":{"type":"string"}}}]})",
        {R"({"id":1})", R"({"id":1,"name":"n"})"}, {R"({"name":"n"})"});
  check(R"({"allOf":[{"type":["string","integer"]},{"type":["integer","null"]}]})", {"1"}, {R"("a")", "null"});
  check(R"({"allOf":[{"enum":["a","b","c"]},{"enum":["b","c","d"]}]})", {R"("b")", R"("c")"}, {R"("a")", R"("d")"});
  EXPECT_NE(error_of(R"({"allOf":[{"type":"string","pattern":"a"},{"pattern":"b"}]})").find("'pattern'"), std::string::npos);
  EXPECT_NE(error_of(R"({"allOf":[{"type":"string"},{"type":"integer"}]})").find("'allOf'"), std::string::npos);
  EXPECT_NE(error_of(R"({"allOf":[{"properties":{"a":{}},"additionalProperties":false},{"properties":{"b":{}}}]})").find("'b'"),
            std::string::npos);
}

// ---- references

TEST(JsonSchemaRefs, DefinitionsAndRecursion) {
  // A linked list.
  check(R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},
            "required":["value","next"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
        {R"({"value":1,"next":null})", R"({"value":1,"next":{"value":2,"next":{"value":3,"next":null}}})"},
        {R"({"value":1})", R"({"value":1,"next":{"value":2}})", R"({"value":1,"next":{"value":"x","next":null}})"});
  // A tree through "definitions" and a ref to the root.
  check(R"({"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}},"required":["name"]})",
        {R"({"name":"r"})", R"({"name":"r","children":[]})", R"({"name":"r","children":[{"name":"a","children":[{"name":"b"}]},{"name":"c"}]})"},
        {R"({"name":"r","children":[{}]})", R"({"name":"r","children":[{"name":"a","children":[{"x":1}]}]})"});
  check(R"({"definitions":{"id":{"type":"string","minLength":1}},"type":"array","items":{"$ref":"#/definitions/id"}})", {R"(["a","b"])"}, {R"([""])"});
  // Mutual recursion, refs to refs, and a pointer into properties.
  check(R"({"$defs":{"a":{"type":"array","items":{"$ref":"#/$defs/b"}},"b":{"anyOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/leaf"}]},
            "leaf":{"$ref":"#/$defs/leafy"},"leafy":{"type":"integer"}},"$ref":"#/$defs/a"})",
        {"[]", "[1,[2,[]],[[3]]]"}, {R"([1,["x"]])", "1"});
  check(R"({"type":"object","properties":{"p":{"type":"boolean"},"q":{"$ref":"#/properties/p"}},"required":["p","q"]})",
        {R"({"p":true,"q":false})"}, {R"({"p":true,"q":1})"});
  // $ref beside other constraints: both apply.
  check(R"({"$defs":{"s":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/s","maxLength":2,"description":"d"}},"required":["x"]})",
        {R"({"x":"ab"})"}, {R"({"x":"abc"})", R"({"x":1})"});
}

TEST(JsonSchemaRefs, Errors) {
  EXPECT_NE(error_of(R"({"$ref":"#/$defs/missing"})").find("'$ref'"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref":"https://example.com/schema.json"})").find("local"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref":"#anchor"})").find("'$ref'"), std::string::npos);
  // Left recursion (no token before the reference comes back).
  EXPECT_NE(error_of(R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of(R"({"anyOf":[{"$ref":"#"},{"type":"null"}]})").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of(R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"}]},"b":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"})").find("$ref"),
            std::string::npos);
}

// ---- unsupported keywords, generic JSON, grammar hygiene

TEST(JsonSchemaUnsupported, KeywordsAreNamedWithTheirPointer) {
  const char* const keywords[] = {"uniqueItems", "patternProperties", "minProperties", "maxProperties", "not", "if", "then", "else",
                                  "multipleOf", "dependentRequired", "dependentSchemas", "contains", "minContains", "propertyNames",
                                  "unevaluatedProperties", "unevaluatedItems", "additionalItems", "nullable", "$anchor"};
  for (const char* k : keywords) {
    const ojson schema = {{"type", "object"}, {"properties", {{"a", {{"type", "array"}, {k, true}}}}}};
    EXPECT_EQ(error_of(schema.dump()), std::string("unsupported JSON Schema keyword '") + k + "' at /properties/a") << k;
    EXPECT_EQ(error_of(ojson{{k, 1}}.dump()), std::string("unsupported JSON Schema keyword '") + k + "' at (root)") << k;
  }
  EXPECT_NE(error_of(R"({"$defs":{"x":{"type":"integer","multipleOf":2}},"items":{"$ref":"#/$defs/x"}})").find("at /$defs/x"), std::string::npos);
  // The exception is a GrammarError.
  EXPECT_THROW(json_schema_to_gbnf(nlohmann::json::parse(R"({"not":{}})")), GrammarError);
}

TEST(JsonSchemaGeneric, JsonObjectGrammar) {
  const std::string gbnf = json_object_gbnf();
  SCOPED_TRACE(gbnf);
  const Grammar g = parse_gbnf(gbnf);
  for (const char* ok : {"{}", R"({"a":1})", R"({"a":[1,2.5,-3e-2,true,false,null,"s\n\u00e9"],"b":{"c":{}}})", "{ \"a\" : { } }",
                         "{\n  \"a\": [\n    1,\n    2\n  ]\n}", R"({"":""})", R"({"a":1,"a":2})"})
    EXPECT_TRUE(grammar_accepts(g, ok)) << ok;
  for (const char* bad : {"", "[]", "1", "\"s\"", "null", "{", "}", "{a:1}", R"({"a":1,})", R"({"a" 1})", R"({'a':1})", R"({"a":01})",
                          R"({"a":[1,]})", R"({"a":tru})", " {}", "{} ", "{}\n", R"({"a":"x
"})"})
    EXPECT_FALSE(grammar_accepts(g, bad)) << bad;
  EXPECT_FALSE(grammar_accepts(g, "{" + std::string(30, ' ') + "}"));
  EXPECT_TRUE(grammar_accepts_prefix(g, R"({"a":[1,{"b")"));
}

TEST(JsonSchemaGeneric, RuleNamesAreSanitizedAndUnique) {
  const std::string gbnf = json_schema_to_gbnf(ojson::parse(R"({"type":"object","properties":{
      "a b":{"type":"string","maxLength":2},"a_b":{"type":"string","maxLength":3},"string":{"type":"string","minLength":1},
      "ws":{"type":"integer","minimum":1},"$weird/~name":{"type":"array","items":{"type":"string","maxLength":2}}}})"));
  SCOPED_TRACE(gbnf);
  std::set<std::string> names;
  for (size_t pos = 0; pos < gbnf.size();) {
    const size_t eol = std::min(gbnf.find('\n', pos), gbnf.size());
    const std::string line = gbnf.substr(pos, eol - pos);
    pos = eol + 1;
    const size_t def = line.find(" ::= ");
    ASSERT_NE(def, std::string::npos) << line;
    const std::string name = line.substr(0, def);
    for (char c : name) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '-') << name;
    EXPECT_TRUE(names.insert(name).second) << "duplicate rule " << name;
  }
  const Grammar g = parse_gbnf(gbnf);
  EXPECT_TRUE(grammar_accepts(g, R"({"a b":"xy","a_b":"xyz","string":"s","ws":3,"$weird/~name":["ab"]})"));
  EXPECT_FALSE(grammar_accepts(g, R"({"a b":"xyz"})"));
  EXPECT_FALSE(grammar_accepts(g, R"({"string":""})"));
}

TEST(JsonSchemaGeneric, HostileNestingIsRefusedWithoutExhaustingTheStack) {
  auto nested = [](int depth) {
    std::string s;
    for (int i = 0; i < depth; ++i) s += R"({"type":"array","items":)";
    return s + "{}" + std::string(size_t(depth), '}');
  };
  const Grammar g = compile(nested(100));
  EXPECT_TRUE(grammar_accepts(g, std::string(100, '[') + "1" + std::string(100, ']')));
  EXPECT_NE(error_of(nested(5000)).find("nested deeper than"), std::string::npos);
  const std::string groups = std::string(40, '(') + "a" + std::string(40, ')');
  EXPECT_NE(error_of(ojson{{"type", "string"}, {"pattern", groups}}.dump()).find("groups"), std::string::npos);
  EXPECT_NE(error_of(ojson{{"type", "string"}, {"pattern", std::string(5000, 'a')}}.dump()).find("longer than"), std::string::npos);
}

TEST(JsonSchemaGeneric, LargeCountsAreCapped) {
  // maxLength above the cap is lowered to it (still valid output); minLength above it is refused.
  const Grammar g = compile(R"({"type":"string","maxLength":1000000})");
  EXPECT_TRUE(grammar_accepts(g, "\"" + std::string(100, 'x') + "\""));
  EXPECT_NE(error_of(R"({"type":"string","minLength":1000000})").find("'minLength'"), std::string::npos);
}

}  // namespace
}  // namespace dsv4::grammar::schema_test

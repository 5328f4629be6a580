// Helpers of the JSON Schema tests (json_schema_test.cc, json_schema_numbers_test.cc).
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/json_schema.h"

namespace dsv4::grammar::schema_test {

using ojson = nlohmann::ordered_json;

inline Grammar compile(const std::string& schema) { return parse_gbnf(json_schema_to_gbnf(ojson::parse(schema))); }

// `j` with a space after every ',' and ':' and inside braces: { "a": 1, "b": [ 1, 2 ] }.
inline std::string spaced(const ojson& j) {
  if (j.is_object()) {
    if (j.empty()) return "{ }";
    std::string s = "{ ";
    bool first = true;
    for (const auto& [k, v] : j.items()) {
      s += (first ? "" : ", ") + ojson(k).dump() + ": " + spaced(v);
      first = false;
    }
    return s + " }";
  }
  if (j.is_array()) {
    if (j.empty()) return "[ ]";
    std::string s = "[ ";
    for (size_t i = 0; i < j.size(); ++i) s += (i ? ", " : "") + spaced(j[i]);
    return s + " ]";
  }
  return j.dump();
}

// Accepts every text of `valid` (and, where the text is compact JSON and `layouts`, its spaced
// and pretty-printed forms), rejects every text of `invalid`, and rejects whitespace around the
// root value.
inline void check(const std::string& schema, const std::vector<std::string>& valid, const std::vector<std::string>& invalid,
           bool layouts = true) {
  SCOPED_TRACE(schema);
  std::string gbnf;
  ASSERT_NO_THROW(gbnf = json_schema_to_gbnf(ojson::parse(schema)));
  SCOPED_TRACE(gbnf);
  Grammar g;
  ASSERT_NO_THROW(g = parse_gbnf(gbnf));
  for (const std::string& v : valid) {
    EXPECT_TRUE(grammar_accepts(g, v)) << "valid: " << v;
    EXPECT_FALSE(grammar_accepts(g, v + " ")) << "trailing space: " << v;
    EXPECT_FALSE(grammar_accepts(g, " " + v)) << "leading space: " << v;
    EXPECT_FALSE(grammar_accepts(g, v + "\n")) << "trailing newline: " << v;
    const ojson j = ojson::parse(v);
    if (j.dump() != v || !layouts) continue;
    EXPECT_TRUE(grammar_accepts(g, spaced(j))) << "valid, spaced: " << spaced(j);
    EXPECT_TRUE(grammar_accepts(g, j.dump(2))) << "valid, pretty: " << j.dump(2);
    if (j.is_object() || j.is_array()) {  // bounded whitespace only
      const std::string wide = v.substr(0, 1) + std::string(100, ' ') + v.substr(1);
      EXPECT_FALSE(grammar_accepts(g, wide)) << "100 spaces: " << wide;
      EXPECT_FALSE(grammar_accepts(g, v.substr(0, 1) + "\n" + std::string(21, ' ') + v.substr(1))) << "newline + 21 blanks";
    }
  }
  for (const std::string& v : invalid) EXPECT_FALSE(grammar_accepts(g, v)) << "invalid: " << v;
}

inline std::string error_of(const std::string& schema) {
  try {
    json_schema_to_gbnf(ojson::parse(schema));
  } catch (const UnsupportedSchema& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace dsv4::grammar::schema_test

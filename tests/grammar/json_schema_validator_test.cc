// JSON Schema validation (json_schema_validator.h): each keyword accepts what the specification
// accepts and names the value that breaks it.
#include <gtest/gtest.h>

#include "grammar/json_schema_validator.h"

namespace dsv4::grammar {
namespace {

using nlohmann::json;

// "" when valid, else the violation.
std::string violation(const char* schema, const char* value) {
  return json_schema_violation(json::parse(schema), json::parse(value)).value_or("");
}

TEST(JsonSchemaValidator, TypesEnumsAndConsts) {
  EXPECT_EQ(violation(R"({"type":"integer"})", "3"), "");
  EXPECT_EQ(violation(R"({"type":"integer"})", "3.0"), "");  // a number with zero fraction is an integer
  EXPECT_NE(violation(R"({"type":"integer"})", "3.5"), "");
  EXPECT_NE(violation(R"({"type":"string"})", "3"), "");
  EXPECT_EQ(violation(R"({"type":["string","null"]})", "null"), "");
  EXPECT_NE(violation(R"({"type":["string","null"]})", "false"), "");
  EXPECT_EQ(violation(R"({"enum":["a",1,null]})", "1"), "");
  EXPECT_NE(violation(R"({"enum":["a",1,null]})", "\"b\""), "");
  EXPECT_NE(violation(R"({"const":{"x":1}})", R"({"x":2})"), "");
  EXPECT_EQ(violation("true", "[1]"), "");
  EXPECT_NE(violation("false", "[1]"), "");
}

TEST(JsonSchemaValidator, ObjectsInAnyOrderWithRequiredAndAdditionalProperties) {
  const char* s = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},
                      "required":["a"],"additionalProperties":false})";
  EXPECT_EQ(violation(s, R"({"b":"x","a":1})"), "");
  EXPECT_EQ(violation(s, R"({"b":"x"})"), "(root): required property 'a' is missing");
  EXPECT_EQ(violation(s, R"({"a":1,"c":2})"), "(root): property 'c' is not allowed");
  EXPECT_EQ(violation(s, R"({"a":"1"})"), "/a: \"1\" is not of type integer");
  EXPECT_NE(violation(R"({"additionalProperties":{"type":"number"}})", R"({"x":"y"})"), "");
}

TEST(JsonSchemaValidator, ArraysStringsAndNumbers) {
  EXPECT_EQ(violation(R"({"items":{"type":"integer"},"minItems":1,"maxItems":2})", "[1,2]"), "");
  EXPECT_NE(violation(R"({"items":{"type":"integer"},"minItems":1,"maxItems":2})", "[]"), "");
  EXPECT_NE(violation(R"({"items":{"type":"integer"},"minItems":1,"maxItems":2})", "[1,2,3]"), "");
  EXPECT_EQ(violation(R"({"items":{"type":"integer"}})", R"([1,"x"])"), "/1: \"x\" is not of type integer");
  EXPECT_EQ(violation(R"({"prefixItems":[{"type":"string"}],"items":{"type":"integer"}})", R"(["a",1])"), "");
  EXPECT_EQ(violation(R"({"maxLength":2})", "\"éé\""), "");  // code points, not bytes
  EXPECT_NE(violation(R"({"minLength":3})", "\"ab\""), "");
  EXPECT_EQ(violation(R"({"pattern":"[0-9]{3}"})", "\"ab123\""), "");  // unanchored, as JSON Schema says
  EXPECT_NE(violation(R"({"pattern":"^[0-9]{3}$"})", "\"ab123\""), "");
  EXPECT_EQ(violation(R"({"minimum":1,"maximum":3})", "3"), "");
  EXPECT_NE(violation(R"({"exclusiveMaximum":3})", "3"), "");
  EXPECT_NE(violation(R"({"exclusiveMinimum":0})", "0"), "");
  EXPECT_EQ(violation(R"({"multipleOf":0.5})", "2.5"), "");
  EXPECT_NE(violation(R"({"multipleOf":2})", "3"), "");
}

TEST(JsonSchemaValidator, FormatsCombinatorsAndRefs) {
  EXPECT_EQ(violation(R"({"format":"date"})", "\"2024-02-29\""), "");
  EXPECT_NE(violation(R"({"format":"date"})", "\"2024-13-01\""), "");
  EXPECT_EQ(violation(R"({"format":"uuid"})", "\"123e4567-e89b-12d3-a456-426614174000\""), "");
  EXPECT_NE(violation(R"({"format":"email"})", "\"not an email\""), "");
  EXPECT_EQ(violation(R"({"format":"date-time"})", "\"2024-01-02T03:04:05Z\""), "");
  EXPECT_EQ(violation(R"({"anyOf":[{"type":"string"},{"type":"null"}]})", "null"), "");
  EXPECT_NE(violation(R"({"anyOf":[{"type":"string"},{"type":"null"}]})", "1"), "");
  EXPECT_NE(violation(R"({"oneOf":[{"type":"number"},{"type":"integer"}]})", "1"), "");  // both match
  EXPECT_EQ(violation(R"({"oneOf":[{"type":"number"},{"type":"integer"}]})", "1.5"), "");
  EXPECT_NE(violation(R"({"allOf":[{"minimum":1},{"maximum":2}]})", "3"), "");
  EXPECT_NE(violation(R"({"not":{"type":"null"}})", "null"), "");
  const char* tree = R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{
                         "children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["children"]}}})";
  EXPECT_EQ(violation(tree, R"({"children":[{"children":[]}]})"), "");
  EXPECT_EQ(violation(tree, R"({"children":[{"kids":[]}]})"), "/children/0: required property 'children' is missing");
  EXPECT_NE(violation(R"({"$ref":"#/$defs/missing"})", "1"), "");
}

}  // namespace
}  // namespace dsv4::grammar

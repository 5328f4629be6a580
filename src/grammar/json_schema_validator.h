// Checking a JSON value against a JSON Schema, for values the grammar did not produce: the
// arguments of tool calls a model wrote freely (tool_choice "auto"). Unlike the grammar
// (json_schema.h), which must pick one layout, this is JSON Schema's own meaning: properties in
// any order, any whitespace, oneOf as exactly one.
//
// Keywords checked: type, enum, const, properties, required, additionalProperties, items,
// prefixItems, minItems, maxItems, minLength, maxLength (code points), pattern (PCRE2, searched
// as JSON Schema does: unanchored), minimum, maximum, exclusiveMinimum, exclusiveMaximum,
// multipleOf, anyOf, oneOf, allOf, not, $ref (local pointers, $defs / definitions), format
// (date, time, date-time, uuid, email, ipv4). Other keywords are annotations and ignored, as the
// specification says of unknown keywords.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dsv4::grammar {

// The first violation, as "<JSON pointer of the value>: <what is wrong>", or none when `value`
// is valid against `schema` (whose $refs resolve against `schema` itself).
std::optional<std::string> json_schema_violation(const nlohmann::json& schema, const nlohmann::json& value);

}  // namespace dsv4::grammar

// JSON Schema → GBNF (grammar.h) for structured output: the grammar's language is the JSON
// texts that validate against the schema (or a documented subset of them: every text the
// grammar accepts validates, not every valid text is accepted).
//
// The output has no leading or trailing whitespace and allows only bounded whitespace between
// tokens (`ws ::= ( " " | "\n" [ \t]{0,20} )?`), so a model cannot emit unbounded blanks.
//
// Supported (see json_schema.cc for the details and simplifications):
//   type (one or a list), enum, const, anyOf, oneOf (as anyOf), allOf (merged), $ref to local
//   pointers ("#", "#/$defs/x", "#/definitions/x", any "#/..."), recursion through $ref,
//   properties / required / additionalProperties, items / prefixItems / minItems / maxItems,
//   minLength / maxLength / pattern / format (date, time, date-time, uuid, email, ipv4),
//   minimum / maximum / exclusiveMinimum / exclusiveMaximum, boolean schemas.
// Annotations (title, description, default, examples, $comment, $schema, $id, strict,
// deprecated, readOnly, writeOnly, discriminator) are ignored; any other keyword throws
// UnsupportedSchema naming it and where it sits.
#pragma once
#include <concepts>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace dsv4::grammar {

// A schema (or keyword) the engine does not support, or one no JSON text satisfies: the message
// names the keyword and the JSON pointer where it sits, e.g.
// "unsupported JSON Schema keyword 'patternProperties' at /properties/a".
class UnsupportedSchema : public GrammarError {
 public:
  using GrammarError::GrammarError;
};

// GBNF text for any JSON object (response_format {"type":"json_object"}).
std::string json_object_gbnf();

// GBNF text whose language is the JSON texts valid against `schema`. Throws UnsupportedSchema.
// nlohmann::json keeps object keys sorted, so objects come out with their properties in
// alphabetical order; pass an nlohmann::ordered_json to keep the schema's `properties` order.
std::string json_schema_to_gbnf(const nlohmann::json& schema);

namespace detail {
std::string json_schema_to_gbnf_ordered(const nlohmann::ordered_json& schema);
}
// The ordered overload is a template so that calls with anything else (a bool, a braced list)
// are not ambiguous: they convert to nlohmann::json.
template <class J>
  requires std::same_as<J, nlohmann::ordered_json>
std::string json_schema_to_gbnf(const J& schema) {
  return detail::json_schema_to_gbnf_ordered(schema);
}

}  // namespace dsv4::grammar

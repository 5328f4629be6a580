// JSON Schema → GBNF (grammar.h) for structured output: the grammar's language is the JSON
// texts that validate against the schema (or a documented subset of them: every text the
// grammar accepts validates, not every valid text is accepted).
//
// The output has no leading or trailing whitespace and allows only bounded whitespace between
// tokens (`ws ::= ( " " | "\n" [ \t]{0,20} )?`), so a model cannot emit unbounded blanks.
//
// Supported (with the simplifications below):
//   type (one or a list), enum, const, anyOf, oneOf (as anyOf), allOf (merged), $ref to local
//   pointers ("#", "#/$defs/x", "#/definitions/x", any "#/..."), recursion through $ref,
//   properties / required / additionalProperties, items / prefixItems / minItems / maxItems,
//   minLength / maxLength / pattern / format (date, time, date-time, uuid, email, ipv4),
//   minimum / maximum / exclusiveMinimum / exclusiveMaximum, boolean schemas.
// Annotations (title, description, default, examples, $comment, $schema, $id, strict,
// deprecated, readOnly, writeOnly, discriminator) are ignored; any other keyword throws
// UnsupportedSchema naming it and where it sits.
//
// Simplifications (each keeps the rule "every text the grammar accepts validates"):
//   - Objects list properties in the order the schema's `properties` has (as nlohmann::json
//     iterates it: sorted by key; ordered_json keeps the document's order), required ones
//     always, optional ones optional. With `properties`, only declared properties are generated
//     whatever additionalProperties says; without, additionalProperties absent / true is any
//     object, a schema is a map from any string key to it, false is "{}". A required property
//     missing from `properties` is generated with the additionalProperties schema (any value if
//     absent). Keys are written exactly as JSON serializes the name (no \u spellings).
//   - number with any bound (minimum, maximum, exclusive*) is generated as the integers of the
//     range and the decimals I.F (F: 1 to 16 digits, no exponent) whose whole interval [I, I + 1)
//     lies in it (likewise -I.F for (-I - 1, -I]): with maximum 2.5, 1.75 is generated, 2.25 is
//     not. Without bounds it is any JSON number with at most 16 integer digits, 16 fraction
//     digits and 3 exponent digits. integer without bounds has at most 16 digits; a one-sided
//     bound extends to 16 digits (or the bound's own count) on the open side. Magnitudes beyond
//     10^18 - 1 are never generated.
//   - oneOf is read as anyOf: the grammar does not enforce that exactly one branch matches.
//   - allOf, and $ref / anyOf / oneOf beside other constraints, are merged into one schema
//     where the keywords combine (json_schema_merge.cc); otherwise UnsupportedSchema.
//   - enum / const are written as compact JSON (nlohmann's serialization); only `type` may
//     stand beside them (it filters the values).
//   - prefixItems without `items` generates only the prefix (and any values where minItems
//     asks for more); arrays shorter than the prefix are allowed as JSON Schema says.
//   - Counts above kMaxRepeat (json_schema_detail.h; maxLength, maxItems) are lowered to it.
//   - format: date (month and day ranges exact, 29 February only in leap years), time and
//     date-time (RFC 3339, upper-case T and Z, fraction up to 9 digits, offset ±hh:mm), uuid,
//     email (local@domain.tld, plain ASCII atoms), ipv4 (no leading zeros). Not combinable with
//     pattern or length bounds.
//   - pattern: see regex_ast.h (unanchored sides padded, ASCII shorthands).
//   - $ref: local pointers only ("#", "#/$defs/x", "#/definitions/x", "#/anything"), resolved
//     against the root document ($id does not change the base). A $ref cycle that returns before
//     any JSON token (left recursion) is UnsupportedSchema.
//   - A schema without `type` is the union of the types whose keywords it uses (any value if
//     none): {"minLength": 2} generates strings only.
//   - Requests carry schemas, so nesting depth (kMaxDepth in json_schema.cc), pattern size and
//     rule-name length are bounded.
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

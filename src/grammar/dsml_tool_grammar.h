// A grammar for DeepSeek-V4 tool calls: the whole DSML block the model writes after its
// content, with each call's function name and arguments constrained by the tool's schema
// (OpenAI's tool_choice "required" or a named function).
//
// The block, as the chat format renders it and chat_parse reads it back (chat_format.cc):
//
//   \n\n<｜DSML｜tool_calls>\n
//   <｜DSML｜invoke name="NAME">\n
//   <｜DSML｜parameter name="P" string="true">raw text</｜DSML｜parameter>\n
//   <｜DSML｜parameter name="Q" string="false">JSON</｜DSML｜parameter>\n
//   </｜DSML｜invoke>\n
//   ...more invokes, separated by \n...
//   </｜DSML｜tool_calls>
//
// Arguments are not one JSON object: each top-level property of the parameters schema is a
// parameter of its own, a string written as is (string="true") and anything else as JSON
// (string="false"); the parser assembles the arguments object from them. So the grammar is
// built per property, in the schema's `properties` order, required ones always, optional ones
// optional, no others (the format cannot say "additional" anyway):
//   - a property that can only be a string (type "string", an enum / const of strings) is
//     written raw: its characters, bounded by minLength / maxLength, or one of the enum values,
//     or the format's characters (date, uuid, ...). A `pattern` cannot be applied to raw text
//     (the JSON converter writes patterns in escaped form), so a patterned string is written
//     string="false" as a quoted JSON string instead: still a valid argument;
//   - a property that cannot be a string is written string="false" with the JSON Schema
//     grammar of its schema (json_schema.h; $defs / definitions of the parameters schema are
//     visible to it);
//   - a property that can be both (no type, a list of types with "string") gets both forms.
// A call with no parameters is written "\n" between the invoke lines, as the encoder does.
// Raw text never holds "｜" (U+FF5C), nor do JSON strings unescaped: that character starts every
// DSML marker, and "</｜DSML｜parameter>" inside a value would end it early.
//
// Parameters schemas without `properties` (any object) allow any parameter names; then the
// grammar cannot stop a name from being repeated, which the parser refuses.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"

namespace dsv4::grammar {

struct ToolSchema {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON Schema of an object; null: the function takes none
};

// GBNF text matching one tool-call block calling any of `tools` (`one_call`: exactly one call,
// else one or more). Throws UnsupportedSchema naming the tool, the parameter and the keyword.
std::string dsml_tool_calls_gbnf(const std::vector<ToolSchema>& tools, bool one_call);

}  // namespace dsv4::grammar

#include "grammar/dsml_tool_grammar.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "grammar/gbnf_compose.h"
#include "grammar/json_schema_detail.h"

namespace dsv4::grammar {
namespace {

using ojson = nlohmann::ordered_json;
using detail::gbnf_literal;

// The markup, exactly as chat_format.cc writes it.
constexpr const char* kBlockStart = "\n\n<｜DSML｜tool_calls>\n";
constexpr const char* kBlockEnd = "\n</｜DSML｜tool_calls>";
constexpr const char* kBar = "｜";

// The markup's pieces that every call and parameter repeats, one rule each: compiling a grammar
// walks the whole vocabulary once per byte position of it, so each piece is written once and
// only the names differ from call to call (a tool set compiles in about a second, not minutes).
constexpr const char* kMarkupRules[][2] = {
    {"dsml-invoke", "<｜DSML｜invoke name=\""},     {"dsml-invoke-head", "\">\n"},
    {"dsml-invoke-end", "</｜DSML｜invoke>"},         {"dsml-parameter", "<｜DSML｜parameter name=\""},
    {"dsml-raw", "\" string=\"true\">"},            {"dsml-json", "\" string=\"false\">"},
    {"dsml-parameter-end", "</｜DSML｜parameter>\n"},
};

// The JSON Schema converter's own rules (json_schema.cc), alike in every grammar it writes: kept
// once for all parameters (checked: one that differs is not shared).
const std::set<std::string> kConverterRules = {
    "ws", "char", "string", "number", "integer", "boolean", "null", "value", "object", "member", "array",
    "date", "year", "month-day", "leap-year", "time", "date-time", "uuid", "email", "email-atom",
    "email-label", "ipv4", "ipv4-octet"};

// Names go between quotes in the markup, read back up to the quote that follows.
void check_name(const std::string& name, const std::string& what) {
  const bool bad = name.empty() || name.find(kBar) != std::string::npos ||
                   std::any_of(name.begin(), name.end(), [](char c) {
                     return c == '"' || c == '<' || c == '>' || (unsigned char)c < 0x20;
                   });
  if (bad) throw UnsupportedSchema(what + " '" + name + "' cannot be written in a DSML tool call (empty, or holds '\"', '<', '>', '｜' or a control character)");
}

class Builder {
 public:
  std::string tool(size_t index, const ToolSchema& t) {
    check_name(t.name, "tool name");
    const std::string rule = "t" + std::to_string(index);
    std::string params;
    try {
      params = parameters(rule, t.parameters);
    } catch (const UnsupportedSchema& e) {
      throw UnsupportedSchema("tool '" + t.name + "': " + e.what());
    }
    add(rule, "dsml-invoke " + gbnf_literal(t.name) + " dsml-invoke-head " + params + " dsml-invoke-end");
    return rule;
  }

  std::string text() const {
    std::string markup;
    for (const auto& [name, literal] : kMarkupRules) markup += std::string(name) + " ::= " + gbnf_literal(literal) + "\n";
    return markup + rules_;
  }

 private:
  void add(const std::string& name, const std::string& body) { rules_ += name + " ::= " + body + "\n"; }

  // What goes between the invoke lines: each parameter and its newline, or a lone newline.
  std::string parameters(const std::string& rule, const ojson& schema) {
    if (schema.is_null()) return gbnf_literal("\n");
    if (!schema.is_object()) throw UnsupportedSchema("'parameters' must be a JSON Schema object");
    defs_ = ojson::object();
    for (const auto& [k, v] : schema.items()) {
      if (k == "type") {
        if (v != "object") throw UnsupportedSchema("JSON Schema keyword 'type' at /parameters: must be \"object\"");
      } else if (detail::is_definitions(k)) {
        defs_[k] = v;
      } else if (k != "properties" && k != "required" && k != "additionalProperties" && !detail::is_annotation(k)) {
        throw UnsupportedSchema("unsupported JSON Schema keyword '" + k +
                                "' at /parameters (tool calls write each property as a parameter: type, properties, "
                                "required, additionalProperties and $defs are supported there)");
      }
    }
    const ojson any = true;
    const ojson* additional = schema.contains("additionalProperties") ? &schema["additionalProperties"] : nullptr;
    const bool closed = additional && additional->is_boolean() && !additional->get<bool>();
    struct Prop {
      std::string name;
      const ojson* schema;
      bool required;
    };
    std::vector<Prop> props;
    if (schema.contains("properties")) {
      if (!schema["properties"].is_object()) throw UnsupportedSchema("JSON Schema keyword 'properties' at /parameters: must be an object");
      for (const auto& [name, s] : schema["properties"].items()) props.push_back({name, &s, false});
    }
    if (schema.contains("required")) {
      if (!schema["required"].is_array()) throw UnsupportedSchema("JSON Schema keyword 'required' at /parameters: must be an array of names");
      for (const ojson& r : schema["required"]) {
        if (!r.is_string()) throw UnsupportedSchema("JSON Schema keyword 'required' at /parameters: must be an array of names");
        auto it = std::find_if(props.begin(), props.end(), [&](const Prop& p) { return p.name == r.get<std::string>(); });
        if (it != props.end()) it->required = true;
        else if (closed)
          throw UnsupportedSchema("JSON Schema keyword 'required' at /parameters: '" + r.get<std::string>() +
                                  "' is not in 'properties' and additionalProperties is false");
        else props.push_back({r.get<std::string>(), additional ? additional : &any, true});
      }
    }
    // Any object: any parameters. (With `required` names but no `properties`, only those names:
    // a subset of what is valid, as the JSON converter does.)
    if (!schema.contains("properties") && !closed && props.empty()) return any_parameters(rule, additional ? *additional : any);

    std::vector<std::string> items;
    for (size_t i = 0; i < props.size(); ++i) {
      check_name(props[i].name, "parameter name");
      const std::string item = rule + "-p" + std::to_string(i);
      try {
        add(item, parameter(item, "dsml-parameter " + gbnf_literal(props[i].name), *props[i].schema));
      } catch (const UnsupportedSchema& e) {
        throw UnsupportedSchema("parameter '" + props[i].name + "': " + e.what());
      }
      items.push_back(item);
    }
    if (items.empty()) return gbnf_literal("\n");
    if (std::any_of(props.begin(), props.end(), [](const Prop& p) { return p.required; })) {
      std::string seq;
      for (size_t i = 0; i < items.size(); ++i) seq += (i ? " " : "") + items[i] + (props[i].required ? "" : "?");
      return "( " + seq + " )";
    }
    // All optional: the first one written, then any of those after it; or none.
    std::string alts = gbnf_literal("\n");
    for (size_t k = 0; k < items.size(); ++k) {
      alts += " | " + items[k];
      for (size_t j = k + 1; j < items.size(); ++j) alts += " " + items[j] + "?";
    }
    return "( " + alts + " )";
  }

  // Parameters of an object schema without `properties`: any names, values of `value_schema`.
  std::string any_parameters(const std::string& rule, const ojson& value_schema) {
    add(rule + "-name", "[^\"<>\\x00-\\x1F\\uFF5C]+");
    add(rule + "-any", parameter(rule + "-any", "dsml-parameter " + rule + "-name", value_schema));
    return "( " + gbnf_literal("\n") + " | " + rule + "-any+ )";
  }

  // One parameter: `head` (up to its name) then the forms its schema allows.
  std::string parameter(const std::string& rule, const std::string& head, const ojson& s) {
    std::optional<std::string> raw;
    bool json = true;
    forms(rule, s, raw, json);
    std::vector<std::string> alts;
    if (raw) alts.push_back("dsml-raw" + (raw->empty() ? "" : " " + *raw));
    if (json) alts.push_back("dsml-json " + json_rule(rule + "-j-", s));
    else json_schema_to_gbnf(with_defs(s));  // reports what is wrong with the schema all the same
    std::string body = head + " ( " + alts[0];
    for (size_t i = 1; i < alts.size(); ++i) body += " | " + alts[i];
    return body + " ) dsml-parameter-end";
  }

  // Which forms a value of schema s is written in: raw (the GBNF of its text), JSON, or both.
  void forms(const std::string& rule, const ojson& s, std::optional<std::string>& raw, bool& json) {
    raw.reset();
    json = true;
    if (s.is_boolean()) {
      if (s.get<bool>()) raw = raw_chars(0, -1);
      return;  // false: the JSON converter reports it
    }
    if (!s.is_object()) return;
    for (const char* k : {"anyOf", "oneOf", "allOf", "$ref"})
      if (s.contains(k)) return;  // the converter handles these (as JSON)
    const std::vector<std::string> types = value_types(s);
    const bool any_type = types.empty();
    const bool may_be_string = any_type || std::find(types.begin(), types.end(), "string") != types.end();
    if (!may_be_string) return;
    if (s.contains("enum") || s.contains("const")) {
      if (s.contains("enum") && s.contains("const")) return;
      const ojson values = s.contains("enum") ? s["enum"] : ojson::array({s["const"]});
      if (!values.is_array()) return;
      std::vector<std::string> lits;
      bool others = false;
      for (const ojson& v : values) {
        if (!v.is_string()) {
          others = true;
          continue;
        }
        if (v.get<std::string>().find(kBar) != std::string::npos)
          throw UnsupportedSchema("an enum / const value holds '｜', which ends a DSML parameter");
        lits.push_back(gbnf_literal(v.get<std::string>()));
      }
      if (lits.empty()) return;
      std::string alts;
      for (const std::string& l : lits) alts += (alts.empty() ? "" : " | ") + l;
      raw = "( " + alts + " )";
      json = others;
      return;
    }
    const bool only_string = types.size() == 1 && types[0] == "string";
    if (s.contains("pattern")) return;  // raw text cannot be held to it: quoted JSON only
    if (s.contains("format")) {
      raw = format_rule(rule + "-f-", s);
    } else {
      const int min = length(s, "minLength", 0), max = length(s, "maxLength", -1);
      if (max >= 0 && max < min) return;  // no string: the converter reports it when nothing else is left
      raw = raw_chars(min, max);
    }
    json = !only_string;
  }

  // The types a value of s may have: its `type`, else those its keywords constrain (as the JSON
  // converter reads it); empty: any.
  static std::vector<std::string> value_types(const ojson& s) {
    std::vector<std::string> types;
    auto add = [&](const std::string& t) {
      if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
    };
    if (s.contains("type")) {
      const ojson list = s["type"].is_array() ? s["type"] : ojson::array({s["type"]});
      for (const ojson& t : list)
        if (t.is_string()) add(t.get<std::string>());
      return types;
    }
    static const std::pair<const char*, const char*> kKeywordTypes[] = {
        {"minLength", "string"}, {"maxLength", "string"}, {"pattern", "string"}, {"format", "string"},
        {"minimum", "number"}, {"maximum", "number"}, {"exclusiveMinimum", "number"}, {"exclusiveMaximum", "number"},
        {"properties", "object"}, {"required", "object"}, {"additionalProperties", "object"}, {"items", "array"},
        {"prefixItems", "array"}, {"minItems", "array"}, {"maxItems", "array"}};
    for (const auto& [k, t] : kKeywordTypes)
      if (s.contains(k)) add(t);
    return types;
  }

  // A length bound (a whole non-negative number; bad values are left to the converter, which
  // reports them on the JSON form), lowered to what the grammar writes out.
  static int length(const ojson& s, const char* k, int absent) {
    if (!s.contains(k) || !s[k].is_number()) return absent;
    const double v = s[k].get<double>();
    if (!(v >= 0) || v != double(int64_t(v))) return absent;
    return int(std::min<double>(v, detail::kMaxRepeat));
  }

  std::string raw_chars(int min, int max) {
    if (!raw_char_) {
      add("raw-char", "[^\\uFF5C]");
      raw_char_ = true;
    }
    return detail::gbnf_repeat("raw-char", min, max);
  }

  // A formatted string's characters: the converter's grammar for it without the quotes.
  std::string format_rule(const std::string& prefix, const ojson& s) {
    ojson string_only = {{"type", "string"}, {"format", s["format"]}};
    for (const char* k : {"minLength", "maxLength"})
      if (s.contains(k)) string_only[k] = s[k];
    std::string g = json_schema_to_gbnf(string_only);
    const std::string head = "root ::= \"\\\"\" ", tail = " \"\\\"\"";
    const size_t eol = g.find('\n');
    const std::string root = g.substr(0, eol);
    if (!root.starts_with(head) || !root.ends_with(tail))
      throw UnsupportedSchema("format " + s["format"].dump() + " cannot be written as a raw string parameter");
    g = "root ::= " + root.substr(head.size(), root.size() - head.size() - tail.size()) + g.substr(eol);
    return include(g, prefix);
  }

  // Adds a generated grammar under `prefix` (the converter's own rules shared with the other
  // parameters'); returns the name of its root.
  std::string include(const std::string& gbnf, const std::string& prefix) {
    std::string g = gbnf_prefixed(gbnf, prefix, kConverterRules);
    std::vector<std::pair<std::string, std::string>> rules;  // name, body
    bool shareable = true;
    for (size_t at = 0; at < g.size();) {
      const size_t eol = std::min(g.find('\n', at), g.size());
      const std::string line = g.substr(at, eol - at);
      at = eol + 1;
      const size_t sep = line.find(" ::= ");
      if (sep == std::string::npos) continue;
      rules.emplace_back(line.substr(0, sep), line.substr(sep + 5));
      const auto it = shared_.find(rules.back().first);
      shareable &= it == shared_.end() || it->second == rules.back().second;
    }
    if (!shareable) {  // the converter wrote one of them differently: keep this grammar's apart
      rules_ += gbnf_prefixed(gbnf, prefix) + "\n";
      patch_char(prefix + "char");
      return prefix + "root";
    }
    for (const auto& [name, body] : rules) {
      if (kConverterRules.count(name) && !shared_.emplace(name, body).second) continue;  // already there
      add(name, body);
    }
    patch_char("char");
    return prefix + "root";
  }

  // JSON strings never hold '｜' unescaped: it starts every DSML marker.
  void patch_char(const std::string& name) {
    const std::string from = name + R"( ::= [^"\\\x00-\x1F])";
    if (patched_.count(name)) return;
    if (const size_t at = rules_.find(from); at != std::string::npos && (at == 0 || rules_[at - 1] == '\n')) {
      rules_.insert(at + from.size() - 1, "\\uFF5C");
      patched_.insert(name);
    }
  }

  // s, with the definitions of the parameters schema that its $refs may name.
  ojson with_defs(const ojson& s) const {
    ojson doc = s;
    if (doc.is_object())
      for (const auto& [k, v] : defs_.items())
        if (!doc.contains(k)) doc[k] = v;
    return doc;
  }

  // The JSON Schema grammar of s under `prefix` (with the parameters' $defs), JSON strings kept
  // free of an unescaped '｜'.
  std::string json_rule(const std::string& prefix, const ojson& s) {
    return include(json_schema_to_gbnf(with_defs(s)), prefix);
  }

  std::string rules_;
  ojson defs_ = ojson::object();
  bool raw_char_ = false;
  std::map<std::string, std::string> shared_;  // converter rules added, by name: their bodies
  std::set<std::string> patched_;
};

}  // namespace

std::string dsml_tool_calls_gbnf(const std::vector<ToolSchema>& tools, bool one_call) {
  if (tools.empty()) throw UnsupportedSchema("a tool-call grammar needs at least one tool");
  Builder b;
  std::string calls;
  for (size_t i = 0; i < tools.size(); ++i) calls += (i ? " | " : "") + b.tool(i, tools[i]);
  std::string root = "root ::= " + gbnf_literal(kBlockStart) + " call ";
  if (!one_call) root += "( " + gbnf_literal("\n") + " call )* ";
  root += gbnf_literal(kBlockEnd) + "\ncall ::= " + calls + "\n";
  return root + b.text();
}

}  // namespace dsv4::grammar

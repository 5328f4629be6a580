#include "grammar/json_schema_validator.h"

#include <cmath>
#include <map>
#include <memory>

#include "text/regex.h"

namespace dsv4::grammar {
namespace {

using nlohmann::json;

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool is_type(const json& v, const std::string& type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer")
    return v.is_number_integer() || (v.is_number_float() && std::trunc(v.get<double>()) == v.get<double>());
  return true;  // an unknown type name constrains nothing here
}

// JSON Schema's formats, as the grammar generates them (json_schema.h).
const char* format_pattern(const std::string& format) {
  static const std::map<std::string, const char*> patterns = {
      {"date", R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$)"},
      {"time", R"(^([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$)"},
      {"date-time", R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$)"},
      {"uuid", R"(^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$)"},
      {"email", R"(^[^@\s]+@[^@\s]+\.[^@\s]+$)"},
      {"ipv4", R"(^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$)"},
  };
  const auto it = patterns.find(format);
  return it == patterns.end() ? nullptr : it->second;
}

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  std::optional<std::string> check(const json& s, const json& v, const std::string& at, int depth = 0) {
    if (depth > 64) return fail(at, "schema nesting (or $ref recursion) deeper than 64");
    if (s.is_boolean()) return s.get<bool>() ? std::nullopt : fail(at, "no value is allowed here (schema false)");
    if (!s.is_object()) return std::nullopt;
    if (s.contains("$ref")) {
      const json* target = resolve(s["$ref"]);
      if (!target) return fail(at, "$ref '" + s["$ref"].dump() + "' does not resolve");
      if (auto e = check(*target, v, at, depth + 1)) return e;
    }
    if (auto e = check_type(s, v, at)) return e;
    if (s.contains("enum") && s["enum"].is_array()) {
      bool found = false;
      for (const json& option : s["enum"]) found = found || option == v;
      if (!found) return fail(at, v.dump() + " is not one of " + s["enum"].dump());
    }
    if (s.contains("const") && s["const"] != v) return fail(at, v.dump() + " is not " + s["const"].dump());
    if (auto e = check_combinators(s, v, at, depth)) return e;
    if (v.is_object()) return check_object(s, v, at, depth);
    if (v.is_array()) return check_array(s, v, at, depth);
    if (v.is_string()) return check_string(s, v.get<std::string>(), at);
    if (v.is_number()) return check_number(s, v.get<double>(), at);
    return std::nullopt;
  }

 private:
  static std::optional<std::string> fail(const std::string& at, const std::string& what) {
    return (at.empty() ? std::string("(root)") : at) + ": " + what;
  }

  const json* resolve(const json& ref) const {
    if (!ref.is_string()) return nullptr;
    const std::string r = ref;
    if (r.empty() || r[0] != '#') return nullptr;  // local pointers only
    try {
      const json& target = root_.at(json::json_pointer(r.substr(1)));
      return &target;
    } catch (const std::exception&) {
      return nullptr;
    }
  }

  std::optional<std::string> check_type(const json& s, const json& v, const std::string& at) {
    if (!s.contains("type")) return std::nullopt;
    const json& t = s["type"];
    if (t.is_string()) return is_type(v, t) ? std::nullopt : fail(at, v.dump() + " is not of type " + t.get<std::string>());
    if (!t.is_array()) return std::nullopt;
    for (const json& one : t)
      if (one.is_string() && is_type(v, one)) return std::nullopt;
    return fail(at, v.dump() + " is not of any type in " + t.dump());
  }

  std::optional<std::string> check_combinators(const json& s, const json& v, const std::string& at, int depth) {
    if (s.contains("allOf") && s["allOf"].is_array())
      for (const json& sub : s["allOf"])
        if (auto e = check(sub, v, at, depth + 1)) return e;
    if (s.contains("anyOf") && s["anyOf"].is_array()) {
      bool any = false;
      for (const json& sub : s["anyOf"]) any = any || !check(sub, v, at, depth + 1);
      if (!any) return fail(at, "matches none of anyOf");
    }
    if (s.contains("oneOf") && s["oneOf"].is_array()) {
      int matches = 0;
      for (const json& sub : s["oneOf"]) matches += !check(sub, v, at, depth + 1);
      if (matches != 1) return fail(at, "matches " + std::to_string(matches) + " branches of oneOf, not exactly one");
    }
    if (s.contains("not") && !check(s["not"], v, at, depth + 1)) return fail(at, "matches the schema under 'not'");
    return std::nullopt;
  }

  std::optional<std::string> check_object(const json& s, const json& v, const std::string& at, int depth) {
    if (s.contains("required") && s["required"].is_array())
      for (const json& name : s["required"])
        if (name.is_string() && !v.contains(name.get<std::string>()))
          return fail(at, "required property '" + name.get<std::string>() + "' is missing");
    const json* properties = s.contains("properties") && s["properties"].is_object() ? &s["properties"] : nullptr;
    for (const auto& [key, item] : v.items()) {
      const std::string here = at + "/" + key;
      if (properties && properties->contains(key)) {
        if (auto e = check((*properties)[key], item, here, depth + 1)) return e;
      } else if (s.contains("additionalProperties")) {
        const json& extra = s["additionalProperties"];
        if (extra.is_boolean() && !extra.get<bool>()) return fail(at, "property '" + key + "' is not allowed");
        if (auto e = check(extra, item, here, depth + 1)) return e;
      }
    }
    return std::nullopt;
  }

  std::optional<std::string> check_array(const json& s, const json& v, const std::string& at, int depth) {
    const size_t n = v.size();
    if (s.contains("minItems") && s["minItems"].is_number() && double(n) < s["minItems"].get<double>())
      return fail(at, std::to_string(n) + " items, fewer than minItems " + s["minItems"].dump());
    if (s.contains("maxItems") && s["maxItems"].is_number() && double(n) > s["maxItems"].get<double>())
      return fail(at, std::to_string(n) + " items, more than maxItems " + s["maxItems"].dump());
    size_t prefix = 0;
    if (s.contains("prefixItems") && s["prefixItems"].is_array()) {
      prefix = s["prefixItems"].size();
      for (size_t i = 0; i < n && i < prefix; ++i)
        if (auto e = check(s["prefixItems"][i], v[i], at + "/" + std::to_string(i), depth + 1)) return e;
    }
    if (s.contains("items") && (s["items"].is_object() || s["items"].is_boolean()))
      for (size_t i = prefix; i < n; ++i)
        if (auto e = check(s["items"], v[i], at + "/" + std::to_string(i), depth + 1)) return e;
    return std::nullopt;
  }

  std::optional<std::string> check_string(const json& s, const std::string& v, const std::string& at) {
    const size_t n = code_points(v);
    if (s.contains("minLength") && s["minLength"].is_number() && double(n) < s["minLength"].get<double>())
      return fail(at, "length " + std::to_string(n) + " is below minLength " + s["minLength"].dump());
    if (s.contains("maxLength") && s["maxLength"].is_number() && double(n) > s["maxLength"].get<double>())
      return fail(at, "length " + std::to_string(n) + " is above maxLength " + s["maxLength"].dump());
    if (s.contains("pattern") && s["pattern"].is_string() && !matches(s["pattern"], v))
      return fail(at, json(v).dump() + " does not match pattern " + s["pattern"].dump());
    if (s.contains("format") && s["format"].is_string()) {
      const char* p = format_pattern(s["format"]);
      if (p && !matches(p, v)) return fail(at, json(v).dump() + " is not a valid " + s["format"].get<std::string>());
    }
    return std::nullopt;
  }

  std::optional<std::string> check_number(const json& s, double x, const std::string& at) {
    auto bound = [&](const char* key) -> std::optional<double> {
      if (s.contains(key) && s[key].is_number()) return s[key].get<double>();
      return std::nullopt;
    };
    if (auto b = bound("minimum"); b && x < *b) return fail(at, json(x).dump() + " is below minimum " + json(*b).dump());
    if (auto b = bound("maximum"); b && x > *b) return fail(at, json(x).dump() + " is above maximum " + json(*b).dump());
    if (auto b = bound("exclusiveMinimum"); b && x <= *b)
      return fail(at, json(x).dump() + " is not above exclusiveMinimum " + json(*b).dump());
    if (auto b = bound("exclusiveMaximum"); b && x >= *b)
      return fail(at, json(x).dump() + " is not below exclusiveMaximum " + json(*b).dump());
    if (auto m = bound("multipleOf"); m && *m > 0) {
      const double q = x / *m;
      if (std::fabs(q - std::round(q)) > 1e-9 * std::max(1.0, std::fabs(q)))
        return fail(at, json(x).dump() + " is not a multiple of " + json(*m).dump());
    }
    return std::nullopt;
  }

  bool matches(const std::string& pattern, const std::string& v) {
    auto& re = regexes_[pattern];
    if (!re) {
      try {
        re = std::make_unique<text::Regex>(pattern, /*native_unicode=*/true);
      } catch (const std::exception&) {
        return true;  // a pattern PCRE2 cannot read constrains nothing we can check
      }
    }
    return re->find_first(v).has_value();
  }

  const json& root_;
  std::map<std::string, std::unique_ptr<text::Regex>> regexes_;
};

}  // namespace

std::optional<std::string> json_schema_violation(const json& schema, const json& value) {
  return Validator(schema).check(schema, value, "");
}

}  // namespace dsv4::grammar

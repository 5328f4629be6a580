// What the JSON Schema converter's files share about reading a schema (json_schema_detail.h):
// JSON pointers, which keywords are known and which type each constrains, the types a schema
// allows, and count keywords (minLength, maxItems...).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "grammar/json_schema_detail.h"

namespace dsv4::grammar::detail {
namespace {

const char* const kTypes[] = {"null", "boolean", "integer", "number", "string", "object", "array"};

// Keywords by the type they constrain (a schema without `type` is read as the union of the
// types whose keywords it uses).
const std::map<std::string, std::string>& keyword_types() {
  static const std::map<std::string, std::string> k = {
      {"minLength", "string"},          {"maxLength", "string"},         {"pattern", "string"},
      {"format", "string"},             {"minimum", "number"},           {"maximum", "number"},
      {"exclusiveMinimum", "number"},   {"exclusiveMaximum", "number"},  {"properties", "object"},
      {"required", "object"},           {"additionalProperties", "object"}, {"items", "array"},
      {"prefixItems", "array"},         {"minItems", "array"},           {"maxItems", "array"},
  };
  return k;
}

// The value of a count keyword (minLength, maxItems...), `absent` when s has none.
int count_keyword(const ojson& s, const char* k, const std::string& where, int absent) {
  if (!s.contains(k)) return absent;
  const ojson& v = s[k];
  if (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()) && v.get<double>() >= 0) {
    return int(std::min(v.get<double>(), 1e9));
  }
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) invalid_keyword(k, where, "must be a non-negative integer");
  return int(std::min<uint64_t>(v.get<uint64_t>(), 1'000'000'000));
}

}  // namespace

// ---- JSON pointers

std::string at(const std::string& where) {
  if (where.empty()) return "(root)";
  if (where.size() > 200) return "..." + where.substr(where.size() - 200);  // a hostile depth
  return where;
}

std::string child(const std::string& where, const std::string& key) {
  std::string out = where + "/";
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

// Percent-decoding of a URI fragment ("#/%24defs/a").
std::string percent_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// ---- keywords

bool is_annotation(const std::string& k) {
  // "discriminator" is OpenAPI's (pydantic writes it beside oneOf): validators ignore it, and
  // the branches themselves hold the constraint it describes.
  static const char* const kAnnotations[] = {"title",      "description", "$schema",   "$id",         "default",
                                             "examples",   "$comment",    "strict",    "deprecated",  "readOnly",
                                             "writeOnly",  "discriminator"};
  for (const char* a : kAnnotations)
    if (k == a) return true;
  return false;
}

bool is_definitions(const std::string& k) { return k == "$defs" || k == "definitions"; }

bool is_known_keyword(const std::string& k, const ojson& v) {
  if (is_annotation(k) || is_definitions(k) || keyword_types().count(k)) return true;
  for (const char* s : {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref"})
    if (k == s) return true;
  return k == "uniqueItems" && v.is_boolean() && !v.get<bool>();  // false constrains nothing
}

void invalid_keyword(const std::string& keyword, const std::string& where, const std::string& what) {
  throw UnsupportedSchema("JSON Schema keyword '" + keyword + "' at " + at(where) + ": " + what);
}

// ---- types

std::vector<std::string> schema_types(const ojson& s, const std::string& where) {
  std::vector<std::string> out;
  auto add = [&](const std::string& t) {
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  };
  if (s.contains("type")) {
    const ojson& t = s["type"];
    const ojson list = t.is_array() ? t : ojson::array({t});
    for (const ojson& x : list) {
      if (!x.is_string()) invalid_keyword("type", where, "must be a type name or an array of them");
      const std::string name = x.get<std::string>();
      if (std::find(std::begin(kTypes), std::end(kTypes), name) == std::end(kTypes))
        invalid_keyword("type", where, "unknown type '" + name + "'");
      add(name);
    }
    if (out.empty()) invalid_keyword("type", where, "an empty list of types allows no value");
  } else {
    for (const auto& [k, v] : s.items())
      if (const auto it = keyword_types().find(k); it != keyword_types().end()) add(it->second);
  }
  if (std::find(out.begin(), out.end(), "number") != out.end()) std::erase(out, "integer");  // number covers it
  return out;
}

bool has_type(const ojson& v, const std::vector<std::string>& allowed) {
  auto in = [&](const char* t) { return std::find(allowed.begin(), allowed.end(), t) != allowed.end(); };
  switch (v.type()) {
    case ojson::value_t::null: return in("null");
    case ojson::value_t::boolean: return in("boolean");
    case ojson::value_t::number_integer:
    case ojson::value_t::number_unsigned: return in("integer") || in("number");
    case ojson::value_t::number_float:
      return in("number") || (in("integer") && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()));
    case ojson::value_t::string: return in("string");
    case ojson::value_t::object: return in("object");
    case ojson::value_t::array: return in("array");
    default: return false;
  }
}

// ---- counts

std::pair<int, int> count_range(const ojson& s, const char* min_k, const char* max_k, const std::string& where) {
  const int min = count_keyword(s, min_k, where, 0);
  int max = count_keyword(s, max_k, where, -1);
  if (max >= 0 && max < min) invalid_keyword(max_k, where, "is below " + std::string(min_k) + ": no value is valid");
  if (min > kMaxRepeat) invalid_keyword(min_k, where, "above " + std::to_string(kMaxRepeat) + " is not supported");
  if (max > kMaxRepeat) max = kMaxRepeat;
  return {min, max};
}

}  // namespace dsv4::grammar::detail

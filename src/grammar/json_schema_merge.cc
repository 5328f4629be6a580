// allOf (and $ref / anyOf / oneOf beside other keywords) as one schema (json_schema_detail.h).
//
// The parts are flattened (nested allOf, $ref replaced by its target) and their keywords
// combined where the conjunction is again a keyword: type sets intersect, enum / const
// intersect, required lists unite, lower bounds take the largest and upper bounds the smallest,
// properties unite (a property in several parts gets an allOf of its schemas, merged when
// visited), equal values stay. Anything else that differs between parts throws
// UnsupportedSchema, as does additionalProperties in one part while another declares properties
// it does not know (merging would let those through).
#include <algorithm>
#include <set>

#include "grammar/json_schema_detail.h"

namespace dsv4::grammar::detail {
namespace {

std::vector<std::string> type_list(const ojson& t, const std::string& where) {
  std::vector<std::string> out;
  if (t.is_string()) {
    out.push_back(t.get<std::string>());
  } else if (t.is_array()) {
    for (const ojson& x : t) {
      if (!x.is_string()) throw UnsupportedSchema("JSON Schema keyword 'type' at " + at(where) + " must be a string or an array of strings");
      out.push_back(x.get<std::string>());
    }
  } else {
    throw UnsupportedSchema("JSON Schema keyword 'type' at " + at(where) + " must be a string or an array of strings");
  }
  return out;
}

ojson intersect_types(const ojson& a, const ojson& b, const std::string& where) {
  const auto ta = type_list(a, where), tb = type_list(b, where);
  auto has = [](const std::vector<std::string>& v, const std::string& t) { return std::find(v.begin(), v.end(), t) != v.end(); };
  ojson out = ojson::array();
  for (const std::string& t : ta) {
    if (has(tb, t)) out.push_back(t);
    else if (t == "integer" && has(tb, "number")) out.push_back(t);
    else if (t == "number" && has(tb, "integer")) out.push_back("integer");
  }
  if (out.empty())
    throw UnsupportedSchema("JSON Schema keyword 'allOf' at " + at(where) + ": the types " + a.dump() + " and " + b.dump() +
                            " have no value in common");
  return out.size() == 1 ? out[0] : out;
}

bool is_number(const ojson& v) { return v.is_number(); }

struct Merger {
  Merger(const std::string& w, const RefResolver& r) : where(w), resolve(r) {}
  const std::string& where;
  const RefResolver& resolve;
  ojson out = ojson::object();
  std::vector<ojson> value_sets;  // each enum / const: the values allowed
  // Per part: the property names it declares, and whether it restricts other properties.
  std::vector<std::pair<std::set<std::string>, bool>> object_parts;

  void add(const ojson& part, int depth) {
    if (depth > 32) throw UnsupportedSchema("JSON Schema keyword 'allOf' at " + at(where) + ": $ref nesting too deep (a $ref cycle?)");
    if (part.is_boolean()) {
      if (part.get<bool>()) return;
      throw UnsupportedSchema("JSON Schema at " + at(where) + ": an allOf part is the schema 'false': no value is valid");
    }
    if (!part.is_object()) throw UnsupportedSchema("JSON Schema at " + at(where) + ": an allOf part is not a schema (object or boolean)");
    if (part.contains("$ref")) {
      const ojson& ref = part["$ref"];
      if (!ref.is_string()) throw UnsupportedSchema("JSON Schema keyword '$ref' at " + at(where) + " must be a string");
      add(resolve(ref.get<std::string>(), where), depth + 1);
    }
    if (part.contains("allOf")) {
      const ojson& all = part["allOf"];
      if (!all.is_array() || all.empty()) throw UnsupportedSchema("JSON Schema keyword 'allOf' at " + at(where) + " must be a non-empty array");
      for (const ojson& p : all) add(p, depth + 1);
    }
    std::set<std::string> names;
    bool restricts = false;
    for (const auto& [k, v] : part.items()) {
      if (k == "$ref" || k == "allOf" || is_annotation(k) || is_definitions(k)) continue;
      if (k == "properties" && v.is_object())
        for (const auto& [name, s] : v.items()) names.insert(name);
      if (k == "required" && v.is_array())
        for (const ojson& name : v)
          if (name.is_string()) names.insert(name.get<std::string>());
      if (k == "additionalProperties" && !(v.is_boolean() && v.get<bool>())) restricts = true;
      combine(k, v);
    }
    if (!names.empty() || restricts) object_parts.push_back({std::move(names), restricts});
  }

  [[noreturn]] void conflict(const std::string& k) const {
    throw UnsupportedSchema("JSON Schema keyword 'allOf' at " + at(where) + ": cannot combine two different '" + k + "' constraints");
  }

  void combine(const std::string& k, const ojson& v) {
    if (k == "enum" || k == "const") {
      value_sets.push_back(k == "const" ? ojson::array({v}) : v);
      if (k == "enum" && !v.is_array()) throw UnsupportedSchema("JSON Schema keyword 'enum' at " + at(where) + " must be an array");
      return;
    }
    if (!out.contains(k)) {
      out[k] = v;
      return;
    }
    ojson& cur = out[k];
    if (cur == v) return;
    if (k == "type") {
      cur = intersect_types(cur, v, where);
    } else if (k == "required" && cur.is_array() && v.is_array()) {
      for (const ojson& name : v)
        if (std::find(cur.begin(), cur.end(), name) == cur.end()) cur.push_back(name);
    } else if (k == "properties" && cur.is_object() && v.is_object()) {
      for (const auto& [name, s] : v.items()) {
        if (!cur.contains(name)) cur[name] = s;
        else if (cur[name] != s) cur[name] = ojson{{"allOf", ojson::array({cur[name], s})}};
      }
    } else if ((k == "items" || k == "additionalProperties") && !cur.is_boolean() && !v.is_boolean()) {
      cur = ojson{{"allOf", ojson::array({cur, v})}};
    } else if ((k == "minLength" || k == "minItems" || k == "minimum" || k == "exclusiveMinimum") && is_number(cur) && is_number(v)) {
      cur = std::max(cur.get<double>(), v.get<double>()) == cur.get<double>() ? cur : v;
    } else if ((k == "maxLength" || k == "maxItems" || k == "maximum" || k == "exclusiveMaximum") && is_number(cur) && is_number(v)) {
      cur = std::min(cur.get<double>(), v.get<double>()) == cur.get<double>() ? cur : v;
    } else {
      conflict(k);
    }
  }

  void finish() {
    for (const auto& [names, restricts] : object_parts) {
      if (!restricts) continue;
      for (const auto& [other_names, other_restricts] : object_parts)
        for (const std::string& n : other_names)
          if (!names.count(n))
            throw UnsupportedSchema("JSON Schema keyword 'allOf' at " + at(where) + ": property '" + n +
                                    "' is declared in one part but another part's additionalProperties restricts it");
    }
    if (value_sets.empty()) return;
    ojson values = value_sets[0];
    for (size_t i = 1; i < value_sets.size(); ++i) {
      ojson kept = ojson::array();
      for (const ojson& v : values)
        if (std::find(value_sets[i].begin(), value_sets[i].end(), v) != value_sets[i].end()) kept.push_back(v);
      values = std::move(kept);
    }
    if (values.empty())
      throw UnsupportedSchema("JSON Schema keyword 'allOf' at " + at(where) + ": its enum / const constraints have no value in common");
    out["enum"] = values;
  }
};

}  // namespace

ojson merge_schemas(const std::vector<ojson>& parts, const std::string& where, const RefResolver& resolve) {
  Merger m(where, resolve);
  for (const ojson& p : parts) m.add(p, 0);
  m.finish();
  return m.out;
}

}  // namespace dsv4::grammar::detail

// JSON Schema → GBNF (json_schema.h).
//
// Every schema node becomes a rule named after its JSON pointer ("/properties/a/items" →
// "a-items"; identical bodies share one rule), every $ref target a rule of its own, so
// recursive definitions are recursive rules. Whitespace between tokens is `ws`, at most one
// space or a newline and 20 blanks; the root value has none around it.
//
// The simplifications (where the grammar accepts less than the schema allows) are listed in
// json_schema.h.
#include "grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "grammar/json_schema_detail.h"

namespace dsv4::grammar {
namespace detail {
namespace {

const char* const kFormats[] = {"date", "time", "date-time", "uuid", "email", "ipv4"};

constexpr int kMaxDepth = 128;     // schemas nested in schemas (incl. $ref hops and merges)
constexpr size_t kMaxName = 48;    // rule names keep the last this many characters of their path

class Converter {
 public:
  explicit Converter(const ojson& root) : root_(root) {
    for (const BuiltinRule& b : builtin_rules()) taken_.insert(b.name);
  }

  std::string run() {
    rules_.push_back({"root", ""});
    taken_.insert("root");
    ref_rules_["#"] = "root";
    open_refs_.insert("#");
    rules_[0].second = body(root_, "");
    std::string out;
    for (const auto& [name, b] : rules_) out += name + " ::= " + b + "\n";
    return out;
  }

 private:
  // ---- rules

  std::string builtin(const std::string& name) {
    if (added_builtins_.count(name)) return name;
    for (const BuiltinRule& b : builtin_rules()) {
      if (name != b.name) continue;
      added_builtins_.insert(name);
      for (const char* d : b.deps) builtin(d);
      rules_.push_back({b.name, b.body});
      by_body_.emplace(b.body, b.name);
      return name;
    }
    throw std::logic_error("json_schema: no builtin rule " + name);
  }

  // A fresh rule name from a JSON pointer: its segments joined by '-', "properties" left out.
  std::string reserve(const std::string& where, const std::string& suffix = "") {
    std::string name;
    size_t i = 0;
    while (i < where.size()) {
      const size_t j = std::min(where.find('/', i + 1), where.size());
      std::string seg = where.substr(i + 1, j - i - 1);
      i = j;
      if (seg == "properties") continue;
      for (size_t t = seg.find('~'); t != std::string::npos; t = seg.find('~', t + 1))  // RFC 6901 escapes
        seg.replace(t, 2, seg.compare(t, 2, "~1") == 0 ? "/" : "~");
      if (seg == "$defs" || seg == "definitions") seg = "defs";
      for (char& c : seg)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '-';
      name += "-" + seg;
    }
    name += suffix.empty() ? "" : "-" + suffix;
    std::string clean;  // no runs of '-', none at the ends
    for (char c : name)
      if (c != '-' || (!clean.empty() && clean.back() != '-')) clean += c;
    while (!clean.empty() && clean.back() == '-') clean.pop_back();
    if (clean.size() > kMaxName) {  // deep paths: the most specific end, from a segment start
      clean = clean.substr(clean.size() - kMaxName);
      const size_t dash = clean.find('-');
      if (dash != std::string::npos && dash + 1 < clean.size()) clean = clean.substr(dash + 1);
    }
    if (clean.empty()) clean = "schema";
    std::string unique = clean;
    for (int n = 2; taken_.count(unique); ++n) unique = clean + "-" + std::to_string(n);
    taken_.insert(unique);
    index_[unique] = rules_.size();
    rules_.push_back({unique, ""});
    return unique;
  }

  void define(const std::string& name, const std::string& b) { rules_[index_.at(name)].second = b; }

  // A rule matching `b`: an existing one with the same body, or a new one named after `where`.
  std::string rule(const std::string& where, const std::string& b, const std::string& suffix = "") {
    if (is_identifier(b)) return b;
    if (const auto it = by_body_.find(b); it != by_body_.end()) return it->second;
    const std::string name = reserve(where, suffix);
    define(name, b);
    by_body_.emplace(b, name);
    return name;
  }

  std::string visit(const ojson& s, const std::string& where) { return rule(where, body(s, where)); }

  // ---- schemas

  [[noreturn]] static void unsupported(const std::string& keyword, const std::string& where) {
    throw UnsupportedSchema("unsupported JSON Schema keyword '" + keyword + "' at " + at(where));
  }
  [[noreturn]] static void invalid(const std::string& keyword, const std::string& where, const std::string& what) {
    invalid_keyword(keyword, where, what);
  }

  static bool constrains(const std::string& k) { return !is_annotation(k) && !is_definitions(k); }

  // The alternatives of a rule matching the JSON texts valid against s.
  std::string body(const ojson& s, const std::string& where) {
    // Requests carry schemas: a hostile nesting depth must not exhaust the stack.
    struct Depth {
      int& d;
      explicit Depth(int& x) : d(++x) {}
      ~Depth() { --d; }
    } depth(depth_);
    if (depth_ > kMaxDepth) throw UnsupportedSchema("JSON Schema at " + at(where) + ": nested deeper than " + std::to_string(kMaxDepth) + " schemas");
    if (s.is_boolean()) {
      if (s.get<bool>()) return builtin("value");
      throw UnsupportedSchema("JSON Schema at " + at(where) + " is 'false': no value is valid");
    }
    if (!s.is_object()) throw UnsupportedSchema("JSON Schema at " + at(where) + " is neither an object nor a boolean");
    for (const auto& [k, v] : s.items())
      if (!is_known_keyword(k, v)) unsupported(k, where);

    if (s.contains("$ref")) {
      bool alone = true;
      for (const auto& [k, v] : s.items()) alone &= k == "$ref" || !constrains(k);
      if (alone) return ref_rule(s["$ref"], where);
      return body(merge_schemas({s}, where, resolver()), where);  // $ref and constraints beside it
    }
    if (s.contains("allOf")) return body(merge_schemas({s}, where, resolver()), where);
    for (const char* key : {"anyOf", "oneOf"})
      if (s.contains(key)) return any_of(s, key, where);
    if (s.contains("enum") || s.contains("const")) return enum_body(s, where);

    std::vector<std::string> alts;
    for (const std::string& t : schema_types(s, where)) {
      if (t == "null") alts.push_back(builtin("null"));
      else if (t == "boolean") alts.push_back(builtin("boolean"));
      else if (t == "integer" || t == "number") alts.push_back(number_body(s, where, t == "integer"));
      else if (t == "string") alts.push_back(string_body(s, where));
      else if (t == "object") alts.push_back(object_body(s, where));
      else alts.push_back(array_body(s, where));
    }
    if (alts.empty()) return builtin("value");
    return alternatives(alts);
  }

  std::string any_of(const ojson& s, const char* key, const std::string& where) {
    const ojson& branches = s[key];
    const std::string here = child(where, key);
    if (!branches.is_array() || branches.empty()) invalid(key, where, "must be a non-empty array of schemas");
    ojson siblings = ojson::object();
    bool constrained = false;
    for (const auto& [k, v] : s.items()) {
      if (k == key) continue;
      siblings[k] = v;
      constrained |= constrains(k);
    }
    std::vector<std::string> alts;
    for (size_t i = 0; i < branches.size(); ++i) {
      const std::string branch_where = child(here, std::to_string(i));
      if (!constrained) {
        alts.push_back(visit(branches[i], branch_where));
      } else {  // anyOf beside other keywords: each branch and them
        alts.push_back(visit(merge_schemas({siblings, branches[i]}, branch_where, resolver()), branch_where));
      }
    }
    return alternatives(alts);
  }

  std::string enum_body(const ojson& s, const std::string& where) {
    for (const auto& [k, v] : s.items())
      if (constrains(k) && k != "enum" && k != "const" && k != "type")
        throw UnsupportedSchema("unsupported JSON Schema keyword '" + k + "' beside 'enum' / 'const' at " + at(where));
    ojson values = ojson::array();
    if (s.contains("enum")) {
      if (!s["enum"].is_array()) invalid("enum", where, "must be an array");
      values = s["enum"];
    }
    if (s.contains("const")) {
      const ojson& c = s["const"];
      if (s.contains("enum") && std::find(values.begin(), values.end(), c) == values.end()) values = ojson::array();
      else values = ojson::array({c});
    }
    std::vector<std::string> alts;
    const std::vector<std::string> allowed = s.contains("type") ? schema_types(s, where) : std::vector<std::string>{};
    for (const ojson& v : values) {
      if (!allowed.empty() && !has_type(v, allowed)) continue;
      std::string text;
      try {
        text = v.dump();
      } catch (const nlohmann::json::exception& e) {
        invalid(s.contains("enum") ? "enum" : "const", where, std::string("value not serializable: ") + e.what());
      }
      const std::string lit = gbnf_literal(text);
      if (std::find(alts.begin(), alts.end(), lit) == alts.end()) alts.push_back(lit);
    }
    if (alts.empty()) invalid(s.contains("enum") ? "enum" : "const", where, "no value is valid (none has the schema's type)");
    return alternatives(alts);
  }

  // ---- $ref

  RefResolver resolver() {
    return [this](const std::string& ref, const std::string& where) -> const ojson& { return resolve(ref, where).first; };
  }

  // The schema a local reference names and its pointer.
  std::pair<const ojson&, std::string> resolve(const std::string& ref, const std::string& where) {
    if (ref.empty() || ref[0] != '#')
      invalid("$ref", where, "'" + ref + "' is not a local reference (only '#' and '#/...' are supported)");
    const std::string pointer = percent_decode(ref.substr(1));
    if (pointer.empty()) return {root_, ""};
    if (pointer[0] != '/') invalid("$ref", where, "'" + ref + "': anchors ('#name') are not supported, only JSON pointers");
    try {
      const ojson::json_pointer p(pointer);
      if (root_.contains(p)) return {root_.at(p), pointer};
    } catch (const nlohmann::json::exception&) {
    }
    invalid("$ref", where, "'" + ref + "' points to nothing in the schema");
  }

  std::string ref_rule(const ojson& ref, const std::string& where) {
    if (!ref.is_string()) invalid("$ref", where, "must be a string");
    const std::string r = ref.get<std::string>() == "#/" ? "#" : ref.get<std::string>();
    if (open_refs_.count(r))
      invalid("$ref", where, "'" + r + "' refers back to itself before any JSON token (the grammar would be left-recursive)");
    if (const auto it = ref_rules_.find(r); it != ref_rules_.end()) return it->second;
    const auto [target, pointer] = resolve(r, where);
    const std::string name = reserve(pointer);
    ref_rules_[r] = name;
    open_refs_.insert(r);
    const std::string b = body(target, pointer);
    open_refs_.erase(r);
    define(name, b);
    return name;
  }

  // While a JSON token has been consumed (inside an object, array), a $ref back to one being
  // resolved is ordinary recursion, not left recursion.
  struct TokenConsumed {
    std::set<std::string>& open;
    std::set<std::string> saved;
    explicit TokenConsumed(std::set<std::string>& o) : open(o), saved(std::exchange(o, {})) {}
    ~TokenConsumed() { open = std::move(saved); }
  };

  // ---- numbers

  std::string number_body(const ojson& s, const std::string& where, bool integer) {
    const std::string bounded = bounded_number_gbnf(s, where, integer);
    return bounded.empty() ? builtin(integer ? "integer" : "number") : bounded;
  }

  // ---- strings

  std::string string_body(const ojson& s, const std::string& where) {
    const bool has_length = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("format")) {
      if (!s["format"].is_string()) invalid("format", where, "must be a string");
      const std::string f = s["format"].get<std::string>();
      if (std::find(std::begin(kFormats), std::end(kFormats), f) == std::end(kFormats))
        invalid("format", where, "format '" + f + "' is not supported (date, time, date-time, uuid, email, ipv4 are)");
      for (const char* other : {"pattern", "minLength", "maxLength"})
        if (s.contains(other)) invalid(other, where, "is not supported together with 'format'");
      return "\"\\\"\" " + builtin(f) + " \"\\\"\"";
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) invalid("pattern", where, "must be a string");
      if (has_length) invalid(s.contains("minLength") ? "minLength" : "maxLength", where, "is not supported together with 'pattern'");
      const std::string content = pattern_to_gbnf(s["pattern"].get<std::string>(), [this] { return builtin("char"); }, child(where, "pattern"));
      return "\"\\\"\" " + (content.empty() ? "" : content + " ") + "\"\\\"\"";
    }
    const auto [min, max] = count_range(s, "minLength", "maxLength", where);
    if (min == 0 && max < 0) return builtin("string");
    const std::string chars = gbnf_repeat(builtin("char"), min, max);
    return "\"\\\"\" " + (chars.empty() ? "" : chars + " ") + "\"\\\"\"";
  }

  // ---- objects

  std::string object_body(const ojson& s, const std::string& where) {
    TokenConsumed consumed(open_refs_);
    builtin("ws");
    const ojson no_properties = ojson::object();
    const ojson& props = s.contains("properties") ? s["properties"] : no_properties;
    if (!props.is_object()) invalid("properties", where, "must be an object");
    const ojson* additional = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    const bool closed = additional && additional->is_boolean() && !additional->get<bool>();

    struct Prop {
      std::string name;
      const ojson* schema;
      std::string where;
      bool required;
    };
    std::vector<Prop> list;
    for (const auto& [name, schema] : props.items())
      list.push_back({name, &schema, child(child(where, "properties"), name), false});
    const ojson any = true;
    if (s.contains("required")) {
      if (!s["required"].is_array()) invalid("required", where, "must be an array of property names");
      for (const ojson& r : s["required"]) {
        if (!r.is_string()) invalid("required", where, "must be an array of property names");
        const std::string name = r.get<std::string>();
        auto it = std::find_if(list.begin(), list.end(), [&](const Prop& p) { return p.name == name; });
        if (it != list.end()) {
          it->required = true;
        } else if (closed) {
          invalid("required", where, "property '" + name + "' is required, not in 'properties' and additionalProperties is false: no object is valid");
        } else {
          list.push_back({name, additional ? additional : &any, child(where, "additionalProperties"), true});
        }
      }
    }

    if (list.empty()) {
      if (closed) return R"("{" )" + builtin("ws") + R"( "}")";
      if (!additional || (additional->is_boolean() && additional->get<bool>())) return builtin("object");
      const std::string value = visit(*additional, child(where, "additionalProperties"));
      const std::string kv = rule(where, builtin("string") + R"( ws ":" ws )" + value, "kv");
      return R"("{" ws ( )" + kv + R"( ( ws "," ws )" + kv + R"( )* ws )? "}")";
    }

    std::vector<std::string> kv;
    for (const Prop& p : list) {
      std::string key;
      try {
        key = ojson(p.name).dump();
      } catch (const nlohmann::json::exception&) {
        invalid("properties", where, "a property name is not valid UTF-8");
      }
      kv.push_back(rule(p.where, gbnf_literal(key) + R"( ws ":" ws )" + visit(*p.schema, p.where), "kv"));
    }
    std::vector<bool> required;
    for (const Prop& p : list) required.push_back(p.required);
    return object_layout(kv, required, [&](const std::string& suffix, const std::string& b) { return rule(where, b, suffix); });
  }

  // ---- arrays

  std::string array_body(const ojson& s, const std::string& where) {
    TokenConsumed consumed(open_refs_);
    const ojson* items = s.contains("items") ? &s["items"] : nullptr;
    if (items && items->is_array()) invalid("items", where, "as an array (draft-04 tuples) is not supported: use prefixItems");
    const ojson no_prefix = ojson::array();
    const ojson& prefix = s.contains("prefixItems") ? s["prefixItems"] : no_prefix;
    if (!prefix.is_array()) invalid("prefixItems", where, "must be an array of schemas");
    auto [min, max] = count_range(s, "minItems", "maxItems", where);
    const int k = int(prefix.size());
    // Schema of the items after the prefix; none when false.
    const ojson any = true;
    const ojson* extra = items ? items : (k == 0 || min > k) ? &any : nullptr;
    if (extra && extra->is_boolean() && !extra->get<bool>()) extra = nullptr;
    if (!extra) max = max < 0 ? k : std::min(max, k);
    if (max >= 0 && min > max) invalid("minItems", where, "asks for more items than the array may hold: no value is valid");
    builtin("ws");
    if (max == 0) return R"("[" ws "]")";

    const std::string extra_rule = extra ? visit(*extra, child(where, "items")) : "";
    std::vector<std::string> slot;  // the prefix items' rules (those that fit in max)
    for (int i = 0; i < k && (max < 0 || i < max); ++i)
      slot.push_back(visit(prefix[size_t(i)], child(child(where, "prefixItems"), std::to_string(i))));

    return array_layout(slot, extra_rule, min, max);
  }

  const ojson& root_;
  std::vector<std::pair<std::string, std::string>> rules_;  // in output order, root first
  std::map<std::string, size_t> index_;                     // rules_ position of reserved names
  std::set<std::string> taken_;                             // rule names in use or reserved
  std::set<std::string> added_builtins_;
  std::map<std::string, std::string> by_body_;              // body → rule, to share rules
  std::map<std::string, std::string> ref_rules_;            // "$ref" value → rule
  std::set<std::string> open_refs_;                         // being resolved, no token since
  int depth_ = 0;                                           // nesting of body() calls
};

}  // namespace

std::string json_schema_to_gbnf_ordered(const nlohmann::ordered_json& schema) { return Converter(schema).run(); }

}  // namespace detail

std::string json_object_gbnf() { return detail::json_schema_to_gbnf_ordered(detail::ojson{{"type", "object"}}); }

std::string json_schema_to_gbnf(const nlohmann::json& schema) {
  return detail::json_schema_to_gbnf_ordered(nlohmann::ordered_json(schema));
}

}  // namespace dsv4::grammar

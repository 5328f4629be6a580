// Python value semantics over JSON, as the reference chat encoder relies on them:
// dict.get (absent and null are both None), truthiness (`if tools:`), `x or ""`, and
// str() of what str.format inserts. Errors are ChatFormatError naming the field.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace dsv4::text {

// msg.get(key): nullptr when `object` is not an object or lacks the key.
const nlohmann::ordered_json* get(const nlohmann::ordered_json& object, const char* key);

// `value is None`
bool is_none(const nlohmann::ordered_json* value);

// bool(value): false for None, false, 0, "", [] and {}.
bool truthy(const nlohmann::ordered_json* value);

// str(value) for a scalar: strings as is, None -> "None", true -> "True", numbers as
// Python prints them. Arrays and objects (whose str() is a Python repr no prompt
// should contain) throw ChatFormatError naming `what`.
std::string python_str(const nlohmann::ordered_json& value, const char* what);

// `value or ""`, then str().
std::string text_or_empty(const nlohmann::ordered_json* value, const char* what);

// A field that must be a string (where the reference concatenates it).
std::string string_field(const nlohmann::ordered_json& value, const char* what);

// object[key], throwing ChatFormatError naming `what` when absent.
const nlohmann::ordered_json& required(const nlohmann::ordered_json& object, const char* key, const char* what);

// msg.get("role") as a string ("" when absent or not a string).
std::string role_of(const nlohmann::ordered_json& message);

}  // namespace dsv4::text

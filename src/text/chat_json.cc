#include "text/chat_json.h"

#include "text/chat_format.h"
#include "text/python_json.h"

namespace dsv4::text {

const nlohmann::ordered_json* get(const nlohmann::ordered_json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

bool is_none(const nlohmann::ordered_json* value) { return value == nullptr || value->is_null(); }

bool truthy(const nlohmann::ordered_json* value) {
  if (is_none(value)) return false;
  switch (value->type()) {
    case nlohmann::ordered_json::value_t::boolean: return value->get<bool>();
    case nlohmann::ordered_json::value_t::number_integer: return value->get<int64_t>() != 0;
    case nlohmann::ordered_json::value_t::number_unsigned: return value->get<uint64_t>() != 0;
    case nlohmann::ordered_json::value_t::number_float: return value->get<double>() != 0.0;
    case nlohmann::ordered_json::value_t::string: return !value->get_ref<const std::string&>().empty();
    default: return !value->empty();  // arrays and objects
  }
}

std::string python_str(const nlohmann::ordered_json& value, const char* what) {
  switch (value.type()) {
    case nlohmann::ordered_json::value_t::string: return value.get<std::string>();
    case nlohmann::ordered_json::value_t::null: return "None";
    case nlohmann::ordered_json::value_t::boolean: return value.get<bool>() ? "True" : "False";
    case nlohmann::ordered_json::value_t::number_integer: return std::to_string(value.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return std::to_string(value.get<uint64_t>());
    case nlohmann::ordered_json::value_t::number_float: return python_float_repr(value.get<double>());
    default: throw ChatFormatError(std::string(what) + " must be text, got " + value.dump());
  }
}

std::string text_or_empty(const nlohmann::ordered_json* value, const char* what) {
  return truthy(value) ? python_str(*value, what) : std::string();
}

std::string string_field(const nlohmann::ordered_json& value, const char* what) {
  if (!value.is_string()) throw ChatFormatError(std::string(what) + " must be a string, got " + value.dump());
  return value.get<std::string>();
}

const nlohmann::ordered_json& required(const nlohmann::ordered_json& object, const char* key, const char* what) {
  const nlohmann::ordered_json* value = get(object, key);
  if (!value) throw ChatFormatError(std::string(what) + " has no '" + key + "' field: " + object.dump());
  return *value;
}

std::string role_of(const nlohmann::ordered_json& message) {
  const nlohmann::ordered_json* role = get(message, "role");
  return role && role->is_string() ? role->get<std::string>() : std::string();
}

}  // namespace dsv4::text

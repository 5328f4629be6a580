#include "text/python_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string_view>

namespace dsv4::text {
namespace {

void append_string(std::string& out, const std::string& text) {
  out.push_back('"');
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
          out += buffer;
        } else {
          out.push_back(c);  // everything else verbatim, UTF-8 included (ensure_ascii=False)
        }
    }
  }
  out.push_back('"');
}

void append_value(std::string& out, const nlohmann::ordered_json& value) {
  switch (value.type()) {
    case nlohmann::ordered_json::value_t::null: out += "null"; break;
    case nlohmann::ordered_json::value_t::boolean: out += value.get<bool>() ? "true" : "false"; break;
    case nlohmann::ordered_json::value_t::number_integer: out += std::to_string(value.get<int64_t>()); break;
    case nlohmann::ordered_json::value_t::number_unsigned: out += std::to_string(value.get<uint64_t>()); break;
    case nlohmann::ordered_json::value_t::number_float: {
      const double number = value.get<double>();
      if (std::isnan(number)) out += "NaN";
      else if (std::isinf(number)) out += number > 0 ? "Infinity" : "-Infinity";
      else out += python_float_repr(number);
      break;
    }
    case nlohmann::ordered_json::value_t::string: append_string(out, value.get_ref<const std::string&>()); break;
    case nlohmann::ordered_json::value_t::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& element : value) {
        if (!first) out += ", ";
        first = false;
        append_value(out, element);
      }
      out.push_back(']');
      break;
    }
    case nlohmann::ordered_json::value_t::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, element] : value.items()) {
        if (!first) out += ", ";
        first = false;
        append_string(out, key);
        out += ": ";
        append_value(out, element);
      }
      out.push_back('}');
      break;
    }
    default: throw std::invalid_argument("cannot serialize JSON value of type " + std::string(value.type_name()));
  }
}

}  // namespace

std::string python_float_repr(double value) {
  // Shortest round-trip digits, then Python's layout: positional notation when the
  // decimal exponent is in [-5, 16), scientific with a two-digit exponent otherwise.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  const std::string_view text(buffer, result.ptr - buffer);
  const size_t e = text.find('e');
  std::string_view mantissa = text.substr(0, e);
  const int exponent = std::stoi(std::string(text.substr(e + 1)));
  std::string out;
  if (mantissa.front() == '-') {
    out.push_back('-');
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (const char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  const int point = exponent + 1;  // digits d1 d2 ... with the point after `point` of them
  const int count = static_cast<int>(digits.size());
  if (point <= -4 || point > 16) {
    out += digits[0];
    if (count > 1) {
      out += '.';
      out.append(digits, 1);
    }
    char exponent_text[16];
    std::snprintf(exponent_text, sizeof exponent_text, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exponent_text;
  } else if (point <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-point), '0');
    out += digits;
  } else if (point < count) {
    out.append(digits, 0, static_cast<size_t>(point));
    out += '.';
    out.append(digits, static_cast<size_t>(point));
  } else {
    out += digits;
    out.append(static_cast<size_t>(point - count), '0');
    out += ".0";
  }
  return out;
}

std::string python_json_dumps(const nlohmann::ordered_json& value) {
  std::string out;
  append_value(out, value);
  return out;
}

}  // namespace dsv4::text

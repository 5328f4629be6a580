// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes it, which
// is what DeepSeek's reference chat encoder embeds in prompts: ", " and ": "
// separators, keys in insertion order, non-ASCII characters unescaped, Python's float
// repr (1.0, 1e-05, 1e+16).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace dsv4::text {

std::string python_json_dumps(const nlohmann::ordered_json& value);

// Python's repr() of a float, e.g. 0.1 -> "0.1", 1e16 -> "1e+16", 2.0 -> "2.0".
std::string python_float_repr(double value);

}  // namespace dsv4::text

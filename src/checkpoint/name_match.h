#pragma once
// Tests on tensor names ("layers.3.ffn.experts.7.w1.weight" ends with ".weight", contains ".ffn.").
#include <string_view>

namespace dsv4 {

inline bool ends_with(std::string_view s, std::string_view suffix) { return s.ends_with(suffix); }
inline bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

}  // namespace dsv4

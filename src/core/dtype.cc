#include "core/dtype.h"

#include <array>
#include <utility>

namespace dsv4 {

namespace {
constexpr std::array<std::pair<DType, std::string_view>, 12> kNames = {{
    {DType::BF16, "BF16"}, {DType::F16, "F16"}, {DType::F32, "F32"}, {DType::F64, "F64"},
    {DType::F8_E4M3, "F8_E4M3"}, {DType::F8_E8M0, "F8_E8M0"}, {DType::I8, "I8"},
    {DType::U8, "U8"}, {DType::I16, "I16"}, {DType::I32, "I32"}, {DType::I64, "I64"},
    {DType::BOOL, "BOOL"},
}};
}  // namespace

std::string_view dtype_name(DType t) {
  for (auto& [d, n] : kNames)
    if (d == t) return n;
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (auto& [d, n] : kNames)
    if (n == name) return d;
  return std::nullopt;
}

}  // namespace dsv4

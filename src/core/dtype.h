// Element types of checkpoint tensors (the safetensors dtype names).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dsv4 {

enum class DType : uint8_t {
  BF16, F16, F32, F64, F8_E4M3, F8_E8M0, I8, U8, I16, I32, I64, BOOL,
};

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64: case DType::I64: return 8;
    case DType::F32: case DType::I32: return 4;
    case DType::BF16: case DType::F16: case DType::I16: return 2;
    default: return 1;
  }
}

std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);

}  // namespace dsv4

// Writing named F32 / I64 tensors (outputs of score, dumped intermediates) to one
// .safetensors file.
#pragma once
#include <map>
#include <string>

#include "model/pass.h"

namespace dsv4::cli {

using TensorMap = std::map<std::string, Tracer::Entry>;

Tracer::Entry f32_tensor(std::vector<int64_t> shape, std::vector<float> values);
Tracer::Entry i64_tensor(std::vector<int64_t> shape, std::vector<int64_t> values);
void write_tensor_file(const std::string& path, const TensorMap& tensors);

}  // namespace dsv4::cli

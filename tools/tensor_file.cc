#include "tensor_file.h"

#include "checkpoint/safetensors_writer.h"

namespace dsv4::cli {

Tracer::Entry f32_tensor(std::vector<int64_t> shape, std::vector<float> values) {
  Tracer::Entry e;
  e.dtype = DType::F32;
  e.shape = std::move(shape);
  e.f32 = std::move(values);
  return e;
}

Tracer::Entry i64_tensor(std::vector<int64_t> shape, std::vector<int64_t> values) {
  Tracer::Entry e;
  e.dtype = DType::I64;
  e.shape = std::move(shape);
  e.i64 = std::move(values);
  return e;
}

void write_tensor_file(const std::string& path, const TensorMap& tensors) {
  std::vector<TensorDecl> decls;
  for (auto& [name, e] : tensors) decls.push_back({name, e.dtype, e.shape});
  SafetensorsWriter w(path, decls, {{"format", "pt"}});
  for (auto& [name, e] : tensors) {
    if (e.dtype == DType::I64) w.write_tensor(name, e.i64.data(), e.i64.size() * 8);
    else w.write_tensor(name, e.f32.data(), e.f32.size() * 4);
  }
  w.finish();
}

}  // namespace dsv4::cli

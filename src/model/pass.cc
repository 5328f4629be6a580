#include "model/pass.h"

namespace dsv4 {

void Tracer::record(const std::string& name, const Tensor& t, Backend& be) {
  Entry& e = entries_[name];
  e.shape.assign(t.shape.begin(), t.shape.begin() + t.ndim);
  if (t.dtype == DType::I32) {
    std::vector<int32_t> v(size_t(t.numel()));
    be.to_host(t, v.data());
    e.dtype = DType::I64;
    e.i64.assign(v.begin(), v.end());
    e.f32.clear();
  } else {
    e.dtype = DType::F32;
    e.f32.resize(size_t(t.numel()));
    be.to_host(t, e.f32.data());
    e.i64.clear();
  }
}

const Tracer::Entry* Tracer::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace dsv4

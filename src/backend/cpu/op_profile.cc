#include "backend/cpu/op_profile.h"

#include <cstdio>
#include <cstdlib>

namespace dsv4 {

OpProfile::~OpProfile() {
  double total = 0;
  for (auto& [name, e] : ops_) total += e.us;
  std::fprintf(stderr, "cpu backend ops (DSV4_PROFILE_OPS): %.1f ms in all\n", total / 1e3);
  for (auto& [name, e] : ops_)
    std::fprintf(stderr, "  %-24s %10.1f ms %5.1f%% %9lld calls %9.1f us/call\n", name.c_str(), e.us / 1e3,
                 total > 0 ? 100.0 * e.us / total : 0.0, (long long)e.calls, e.us / double(e.calls));
}

void OpProfile::add(const char* op, double us, int64_t rows) {
  std::string key = op;
  if (rows >= 0) {
    const char* bucket = rows <= 1 ? "1" : rows <= 4 ? "2-4" : rows <= 16 ? "5-16" : rows <= 64 ? "17-64" : "65+";
    key = key + " m=" + bucket;
  }
  Entry& e = ops_[key];
  e.us += us;
  ++e.calls;
}

std::unique_ptr<OpProfile> OpProfile::from_environment() {
  const char* v = std::getenv("DSV4_PROFILE_OPS");
  if (!v || !*v || *v == '0') return nullptr;
  return std::make_unique<OpProfile>();
}

}  // namespace dsv4

#include "server/reply_writer.h"

#include <chrono>
#include <random>

namespace dsv4::server {

std::string json_text(const OrderedJson& j) { return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace); }

std::string sse_event(const std::string& name, const OrderedJson& data) {
  return "event: " + name + "\ndata: " + json_text(data) + "\n\n";
}

std::string random_hex(size_t n) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* digits = "0123456789abcdef";
  std::string s(n, '0');
  for (char& c : s) c = digits[rng() & 15];
  return s;
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace dsv4::server

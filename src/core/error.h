// Errors: every failure the library reports is a dsv4::Error whose message names
// the file, tensor, key or value at fault. The library never aborts on user input.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace dsv4 {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Builds a message from any streamable parts: throw Error(cat("tensor '", name, "' ..."))
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

#define DSV4_CHECK(cond, ...)                          \
  do {                                                 \
    if (!(cond)) throw ::dsv4::Error(::dsv4::cat(__VA_ARGS__)); \
  } while (0)

}  // namespace dsv4

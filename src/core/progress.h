// Long work says how far it is: `done` of `total` units (bytes, tokens) of a named phase, called
// as it goes (a phase may be reported many times; done == total ends it). What to draw, and
// whether to draw at all, is the caller's (the command line draws a line on a terminal).
#pragma once
#include <cstdint>
#include <functional>
#include <string_view>

namespace dsv4 {

using ProgressFn = std::function<void(std::string_view phase, int64_t done, int64_t total)>;

}  // namespace dsv4

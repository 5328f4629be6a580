// Shared by the libFuzzer harnesses (one executable per parser, built with clang when
// DSV4_FUZZ is on; see tests/fuzz/CMakeLists.txt). A harness feeds arbitrary bytes to one
// parser and accepts exactly one outcome besides success: the module's documented error type
// (dsv4::Error, TokenizerError, ChatFormatError, ApiError). Anything else — a crash, a
// sanitizer report, another exception escaping, a broken invariant (FUZZ_CHECK) — is a bug.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unistd.h>

namespace dsv4::fuzz {

// An invariant of the parser under test; a violation aborts, which libFuzzer reports with the input.
#define FUZZ_CHECK(cond, what)                                                      \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "invariant broken: %s (%s:%d)\n", what, __FILE__, __LINE__); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

// A scratch directory of this process (files a parser must read from disk), removed at exit.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("dsv4-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(std::filesystem::temp_directory_path() / ("dsv4-fuzz-" + std::to_string(::getpid())), ec);
    });
    return d;
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& p, std::string_view bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace dsv4::fuzz

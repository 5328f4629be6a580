// MappedFile::prefault maps every page of a file (the page tables hold all of it afterwards, as
// /proc/self/smaps reports), changes nothing in it, and is a no-op on an empty file.
#include <gtest/gtest.h>

#include <fstream>
#include <unistd.h>
#include <vector>

#include "io/mapped_file.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

std::filesystem::path write_bytes(const std::string& name, size_t n) {
  const auto path = test::scratch_dir("mapped_file") / name;
  std::vector<char> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = char(i * 131 + 7);
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(n));
  return path;
}

TEST(MappedFile, PrefaultMapsEveryPageAndChangesNothing) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE)), n = 256 * page + 100;  // 257 pages, the last partly used
  const MappedFile f(write_bytes("pages.bin", n));
  ASSERT_EQ(f.size(), n);
  EXPECT_EQ(test::mapped_resident_bytes(f.data()), 0) << "nothing touched the mapping yet";
  f.prefault();
  EXPECT_EQ(test::mapped_resident_bytes(f.data()), int64_t(257 * page));
  for (size_t i = 0; i < n; i += 4093) ASSERT_EQ(f.data()[i], uint8_t(i * 131 + 7)) << "byte " << i;
}

TEST(MappedFile, PrefaultOfAnEmptyFileDoesNothing) {
  const MappedFile f(write_bytes("empty.bin", 0));
  EXPECT_EQ(f.size(), 0u);
  EXPECT_NO_THROW(f.prefault());
}

TEST(MappedFile, AvailableMemoryIsReadFromTheKernel) {
  const int64_t available = available_memory_bytes();
  EXPECT_GT(available, int64_t(64) << 20);  // any machine that runs these tests
}

}  // namespace
}  // namespace dsv4

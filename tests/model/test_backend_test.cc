// The model and speculative suites run once per backend: tests/CMakeLists.txt registers them a second
// time with DSV4_TEST_BACKEND=reference in their environment, and says so independently on the
// command line (--dsv4-expect-backend=reference). The backend the tests get must be that one, so
// that a registration that loses its environment fails here instead of silently testing the CPU
// backend twice.
#include <gtest/gtest.h>

#include <string>

#include "support/test_support.h"

namespace dsv4 {
namespace {

std::string expected_backend() {
  const std::string flag = "--dsv4-expect-backend=";
  for (const std::string& arg : ::testing::internal::GetArgvs())
    if (arg.rfind(flag, 0) == 0) return arg.substr(flag.size());
  return "";
}

TEST(TestBackend, IsTheOneTheRegistrationAsksFor) {
  auto backend = test::make_test_backend();
  const std::string expected = expected_backend();
  if (expected.empty()) GTEST_SKIP() << "run outside ctest: no backend expected (this one: " << backend->name() << ")";
  EXPECT_EQ(std::string(backend->name()), expected);
}

}  // namespace
}  // namespace dsv4

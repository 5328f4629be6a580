// json.dumps(ensure_ascii=False) layout, which the chat prompts embed.
#include <gtest/gtest.h>

#include "text/python_json.h"

namespace dsv4::text {
namespace {

using Json = nlohmann::ordered_json;

TEST(PythonJson, FloatRepr) {
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(0.1), "0.1");
  EXPECT_EQ(python_float_repr(-0.5), "-0.5");
  EXPECT_EQ(python_float_repr(3.14), "3.14");
  EXPECT_EQ(python_float_repr(1e-05), "1e-05");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(123456789012345680.0), "1.2345678901234568e+17");
  EXPECT_EQ(python_float_repr(1.5e-07), "1.5e-07");
  EXPECT_EQ(python_float_repr(1e100), "1e+100");
  EXPECT_EQ(python_float_repr(0.0), "0.0");
  EXPECT_EQ(python_float_repr(-0.0), "-0.0");
  EXPECT_EQ(python_float_repr(2.5e-300), "2.5e-300");
}

TEST(PythonJson, Layout) {
  const Json value = Json::parse(R"({"b": 1, "a": [true, null, 2.0, "x"], "empty": {}, "list": [], "n": -3})");
  EXPECT_EQ(python_json_dumps(value), R"({"b": 1, "a": [true, null, 2.0, "x"], "empty": {}, "list": [], "n": -3})");
}

TEST(PythonJson, StringEscapes) {
  EXPECT_EQ(python_json_dumps(Json("q\"b\\n\nr\rt\tb\bf\f\x01\x1f\x7f")), R"("q\"b\\n\nr\rt\tb\bf\f\u0001\u001f)" "\x7f\"");
  EXPECT_EQ(python_json_dumps(Json("中文 ü 🎉 \u2028")), "\"中文 ü 🎉 \u2028\"");
}

}  // namespace
}  // namespace dsv4::text

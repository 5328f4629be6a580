// The safetensors reader (io/safetensors.h) and the streaming writer
// (checkpoint/safetensors_writer.h): round trips, every corruption with its own error,
// and a fuzz loop over a valid file's header.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors_writer.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<uint8_t> pattern_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// "{e1,e2,...}" (appended piecewise: GCC 12 warns falsely on chained string operator+).
std::string object(std::initializer_list<std::string> entries) {
  std::string s = "{";
  for (const std::string& e : entries) s.append(s.size() > 1 ? "," : "").append(e);
  return s.append("}");
}

// A raw safetensors file: 8-byte length, header text, data.
std::string raw_file(const std::string& header, const std::string& data) {
  std::string s(8, '\0');
  uint64_t n = header.size();
  std::memcpy(s.data(), &n, 8);
  return s + header + data;
}

// Expects opening `path` to throw dsv4::Error whose message contains every part.
void expect_open_error(const fs::path& path, const std::vector<std::string>& parts, bool store = false) {
  try {
    if (store) TensorStore::open(path);
    else SafetensorsFile::open(path);
    FAIL() << "no error for " << path;
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// ---- writer -> reader round trip -----------------------------------------------------

TEST(SafetensorsWriter, RoundTripEveryDtypeAndShape) {
  const fs::path dir = test::scratch_dir("st_roundtrip");
  const std::vector<TensorDecl> decls = {
      {"bf16", DType::BF16, {3, 5}},    {"f16", DType::F16, {7}},         {"f32", DType::F32, {2, 3, 4}},
      {"f64", DType::F64, {5}},         {"e4m3", DType::F8_E4M3, {9, 13}}, {"e8m0", DType::F8_E8M0, {1, 3}},
      {"i8", DType::I8, {64}},          {"u8", DType::U8, {17}},           {"i16", DType::I16, {4, 4}},
      {"i32", DType::I32, {3}},         {"i64", DType::I64, {2, 2}},       {"bool", DType::BOOL, {11}},
      {"scalar", DType::F32, {}},       {"empty", DType::F32, {0}},        {"empty2d", DType::BF16, {3, 0}},
      {"scalar_i64", DType::I64, {}},
  };
  std::vector<std::vector<uint8_t>> contents;
  {
    SafetensorsWriter w(dir / "a.safetensors", decls, {{"format", "pt"}});
    for (size_t i = 0; i < decls.size(); ++i) {
      contents.push_back(pattern_bytes(size_t(decls[i].nbytes()), uint32_t(i)));
      // Chunks of 3 bytes: tensors arrive in pieces.
      w.begin_tensor(decls[i].name);
      const auto& c = contents.back();
      for (size_t o = 0; o < c.size(); o += 3) w.write(c.data() + o, std::min<size_t>(3, c.size() - o));
    }
    w.finish();
    EXPECT_EQ(fs::file_size(dir / "a.safetensors"), w.file_bytes());
  }
  EXPECT_FALSE(fs::exists(dir / "a.safetensors.partial"));
  auto f = SafetensorsFile::open(dir / "a.safetensors");
  ASSERT_EQ(f->tensors().size(), decls.size());
  EXPECT_EQ(f->metadata().at("format"), "pt");
  for (size_t i = 0; i < decls.size(); ++i) {
    const TensorInfo* t = f->find(decls[i].name);
    ASSERT_NE(t, nullptr) << decls[i].name;
    EXPECT_EQ(t->dtype, decls[i].dtype);
    EXPECT_EQ(t->shape, decls[i].shape);
    ASSERT_EQ(t->nbytes, contents[i].size());
    if (t->nbytes > 0) {  // (memcmp of a zero-element tensor's null pointer would be undefined)
      EXPECT_EQ(std::memcmp(t->data, contents[i].data(), t->nbytes), 0) << decls[i].name;
    }
  }
  // The data section starts 64-byte aligned; tensors whose size is a multiple of 64 stay aligned.
  const std::string bytes = read_file(dir / "a.safetensors");
  uint64_t header_len;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_EQ((8 + header_len) % 64, 0u);
  EXPECT_EQ(uintptr_t(f->find("i8")->data) % 64, 0u);
}

TEST(SafetensorsWriter, ChecksByteCountsAndOrder) {
  const fs::path dir = test::scratch_dir("st_counts");
  const std::vector<TensorDecl> decls = {{"a", DType::F32, {4}}, {"b", DType::BF16, {2}}};
  const std::vector<uint8_t> bytes(64, 1);
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  {
    SafetensorsWriter w(dir / "x.safetensors", decls);
    w.begin_tensor("a");
    EXPECT_NE(message([&] { w.write(bytes.data(), 17); }).find("tensor 'a' holds 16 bytes"), std::string::npos);
  }
  {
    SafetensorsWriter w(dir / "x.safetensors", decls);
    w.write_tensor("a", bytes.data(), 8);
    EXPECT_NE(message([&] { w.begin_tensor("b"); }).find("tensor 'a' received 8 of its 16 bytes"), std::string::npos);
  }
  {
    SafetensorsWriter w(dir / "x.safetensors", decls);
    EXPECT_NE(message([&] { w.begin_tensor("b"); }).find("out of order; expected 'a'"), std::string::npos);
    w.write_tensor("a", bytes.data(), 16);
    EXPECT_NE(message([&] { w.finish(); }).find("tensor 'b' was never written"), std::string::npos);
    w.write_tensor("b", bytes.data(), 4);
    EXPECT_NE(message([&] { w.begin_tensor("c"); }).find("'c' was not declared"), std::string::npos);
  }
  // An unfinished writer leaves no file behind.
  EXPECT_FALSE(fs::exists(dir / "x.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "x.safetensors.partial"));
  EXPECT_NE(message([&] { SafetensorsWriter w(dir / "y.safetensors", {{"a", DType::F32, {1}}, {"a", DType::F32, {1}}}); })
                .find("'a' declared twice"),
            std::string::npos);
}

TEST(SafetensorsWriter, ShardedCheckpointWithIndex) {
  const fs::path dir = test::scratch_dir("st_sharded");
  std::vector<TensorDecl> decls;
  for (int i = 0; i < 10; ++i) decls.push_back({cat("t", i), DType::F32, {int64_t(10 + i * 7)}});
  const auto plan = plan_shards(decls, uint64_t(1) << 30, 3);
  ASSERT_GE(plan.size(), 3u);
  size_t count = 0;
  for (auto& s : plan) count += s.size();
  EXPECT_EQ(count, decls.size());
  ShardedWriter w(dir, plan);
  for (auto& d : decls) {
    const auto bytes = pattern_bytes(size_t(d.nbytes()), uint32_t(d.numel()));
    w.write_tensor(d.name, bytes.data(), bytes.size());
  }
  w.finish();
  const json index = json::parse(read_file(dir / "model.safetensors.index.json"));
  uint64_t total = 0;
  for (auto& d : decls) total += d.nbytes();
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
  EXPECT_EQ(index["weight_map"].size(), decls.size());
  EXPECT_EQ(index["weight_map"]["t0"], shard_file_name(0, int(plan.size())));
  const TensorStore store = TensorStore::open(dir);
  EXPECT_EQ(store.files().size(), plan.size());
  for (auto& d : decls) {
    const auto bytes = pattern_bytes(size_t(d.nbytes()), uint32_t(d.numel()));
    const TensorInfo& t = store.get(d.name);
    ASSERT_EQ(t.nbytes, bytes.size());
    EXPECT_EQ(std::memcmp(t.data, bytes.data(), bytes.size()), 0);
  }
  // A size limit splits too; a tensor larger than the limit gets a shard of its own.
  const auto by_size = plan_shards(decls, 100, 1);
  for (auto& s : by_size) {
    uint64_t b = 0;
    for (auto& t : s) b += t.nbytes();
    EXPECT_TRUE(b <= 100 || s.size() == 1);
  }
}

// ---- corruptions, each with its own message ---------------------------------------------

const std::string kTensorA = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
const std::string kTensorB = R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]})";

TEST(SafetensorsReader, CorruptionsGiveSpecificErrors) {
  const fs::path dir = test::scratch_dir("st_corrupt");
  const fs::path p = dir / "bad.safetensors";
  const std::string data(12, '\x01');
  const std::string file = p.string();

  write_file(p, raw_file(object({kTensorA, kTensorB}), data));
  EXPECT_EQ(SafetensorsFile::open(p)->tensors().size(), 2u);  // the valid base

  std::string s = raw_file(object({kTensorA}), data);
  uint64_t huge = 1 << 20;
  std::memcpy(s.data(), &huge, 8);
  write_file(p, s);
  expect_open_error(p, {file, "header length 1048576 runs beyond the end of the file"});

  write_file(p, "abc");
  expect_open_error(p, {file, "too short"});

  write_file(p, raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},})", data));
  expect_open_error(p, {file, "malformed safetensors header JSON"});

  write_file(p, raw_file(R"({"a":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}})", data));
  expect_open_error(p, {file, "tensor 'a'", "unknown dtype 'F12'"});

  write_file(p, raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data));
  expect_open_error(p, {file, "tensor 'a'", "holds 8 bytes but shape [3] x F32 needs 12"});

  write_file(p, raw_file(object({kTensorA, kTensorB}), data.substr(0, 10)));  // truncated
  expect_open_error(p, {file, "tensor 'b'", "outside the data section", "truncated"});

  write_file(p, raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[6,10]}})",
                         data));
  expect_open_error(p, {file, "'a'", "'b'", "overlapping byte ranges"});

  write_file(p, raw_file(object({kTensorA, kTensorA}), data));
  expect_open_error(p, {file, "duplicate tensor name 'a'"});

  write_file(p, raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data));
  expect_open_error(p, {file, "tensor 'a'", "non-negative"});

  write_file(p, raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data));
  expect_open_error(p, {file, "tensor 'a'", "begin 8 > end 0"});

  write_file(p, raw_file(R"([1,2])", data));
  expect_open_error(p, {file, "not a JSON object"});
}

// A two-shard checkpoint built by hand: shard 1 holds a, shard 2 holds b.
void write_two_shards(const fs::path& dir, const json& weight_map) {
  const std::string data(12, '\x02');
  write_file(dir / "s1.safetensors", raw_file(object({kTensorA}), data.substr(0, 8)));
  write_file(dir / "s2.safetensors", raw_file(R"({"b":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", data.substr(0, 4)));
  write_file(dir / "model.safetensors.index.json", json{{"metadata", {{"total_size", 12}}}, {"weight_map", weight_map}}.dump());
}

TEST(SafetensorsReader, IndexInconsistenciesGiveSpecificErrors) {
  const fs::path dir = test::scratch_dir("st_index");
  const std::string index = (dir / "model.safetensors.index.json").string();

  write_two_shards(dir, {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
  EXPECT_EQ(TensorStore::open(dir).all().size(), 2u);

  write_two_shards(dir, {{"a", "s1.safetensors"}, {"b", "s3.safetensors"}});
  expect_open_error(dir, {index, "tensor 'b'", "missing shard 's3.safetensors'"}, true);

  write_two_shards(dir, {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}, {"c", "s2.safetensors"}});
  expect_open_error(dir, {index, "tensor 'c'", "shard 's2.safetensors'", "does not contain it"}, true);

  write_two_shards(dir, {{"a", "s1.safetensors"}, {"b", "s1.safetensors"}});
  expect_open_error(dir, {index, "tensor 'b'", "does not contain"}, true);

  // b is in s2, but the index does not list s2 at all; then with s2 listed for another tensor only.
  write_two_shards(dir, {{"a", "s1.safetensors"}});
  EXPECT_EQ(TensorStore::open(dir).all().size(), 1u);  // an unlisted shard is not opened
  write_file(dir / "s2.safetensors",
             raw_file(R"({"b":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"d":{"dtype":"U8","shape":[1],"data_offsets":[4,5]}})",
                      std::string(5, '\x03')));
  write_file(dir / "model.safetensors.index.json",
             json{{"weight_map", {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}}}}.dump());
  expect_open_error(dir, {"s2.safetensors", "tensor 'd'", "not listed in model.safetensors.index.json"}, true);

  write_file(dir / "model.safetensors.index.json", "{not json");
  expect_open_error(dir, {index, "malformed JSON"}, true);
  write_file(dir / "model.safetensors.index.json", R"({"metadata":{}})");
  expect_open_error(dir, {index, "weight_map"}, true);
  write_file(dir / "model.safetensors.index.json", R"({"weight_map":{"a":"../s1.safetensors"}})");
  expect_open_error(dir, {index, "must be a file in the checkpoint directory"}, true);
}

// ---- fuzzing: only dsv4::Error or success, never a crash -----------------------------------

TEST(SafetensorsReader, FuzzedHeadersOnlyThrowErrors) {
  const fs::path dir = test::scratch_dir("st_fuzz");
  const fs::path good = dir / "good.safetensors";
  {
    SafetensorsWriter w(good, {{"w", DType::F8_E4M3, {4, 8}}, {"s", DType::F8_E8M0, {1, 1}}, {"v", DType::BF16, {3}},
                               {"i", DType::I64, {2}}, {"z", DType::F32, {}}},
                        {{"format", "pt"}});
    for (auto& [n, b] : std::vector<std::pair<std::string, size_t>>{{"w", 32}, {"s", 1}, {"v", 6}, {"i", 16}, {"z", 4}}) {
      const auto bytes = pattern_bytes(b, 1);
      w.write_tensor(n, bytes.data(), b);
    }
    w.finish();
  }
  const std::string original = read_file(good);
  uint64_t header_len;
  std::memcpy(&header_len, original.data(), 8);
  const size_t header_end = size_t(8 + header_len);

  std::mt19937 rng(11);
  const fs::path p = dir / "fuzz.safetensors";
  int opened = 0, rejected = 0;
  const char interesting[] = "{}[]\":,-0123456789eE.FIUB_ \\\x00\xff";
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s = original;
    const int mode = iter % 4;
    if (mode == 3) {
      s.resize(rng() % (s.size() + 1));  // truncation anywhere
    } else {
      const int flips = 1 + int(rng() % 4);
      for (int k = 0; k < flips; ++k) {
        const size_t pos = rng() % header_end;  // the length prefix or the header text
        if (mode == 0) s[pos] = char(rng());
        else if (mode == 1) s[pos] = interesting[rng() % (sizeof(interesting) - 1)];
        else s[pos] = char(s[pos] ^ (1 << (rng() % 8)));
      }
    }
    fs::remove(p);  // a fresh file: truncating one in place makes ext4 flush it (slow)
    write_file(p, s);
    try {
      auto f = SafetensorsFile::open(p);
      for (const TensorInfo& t : f->tensors()) {  // every exposed tensor lies inside the file
        volatile uint8_t sink = 0;
        for (size_t i = 0; i < t.nbytes; ++i) sink = sink + t.data[i];
      }
      ++opened;
    } catch (const Error&) {
      ++rejected;
    } catch (const std::exception& e) {
      FAIL() << "iteration " << iter << ": exception other than dsv4::Error: " << e.what();
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(opened, 0);
}

}  // namespace
}  // namespace dsv4

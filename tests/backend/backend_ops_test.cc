// Every op of the Backend interface run on the CPU backend — on the scalar kernels, on each SIMD
// instruction set this machine has, and with AMX on prompt rows — and on the reference backend
// (src/backend/reference) with the same inputs, over odd shapes and every weight format, compared
// bit for bit where the CPU backend computes the same operations in the same order, else within a
// per-element bound derived from the data (each test says why the op is not exact).
//
// This file: the table of compared ops (checked against backend.h, so that a new op without a
// comparison is noticed), memory, data movement, element-wise ops and the linear layers. The other
// ops: backend_ops_rows_test.cc (norms, RoPE, fake quantization, hyper-connections),
// backend_ops_attention_test.cc (attention, compressor, indexer), backend_ops_moe_test.cc (MoE).
#include <bit>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "op_compare.h"

namespace dsv4::test {
namespace {

// Each op and how the CPU backend's result is compared with the reference backend's.
const std::map<std::string, std::string> kComparedOps = {
    {"allocate", "64-byte aligned, usable (Memory)"},
    {"release", "(Memory)"},
    {"prepare", "views left as they are: both read weights in place (Prepare)"},
    {"synchronize", "host backends complete every op before it returns: a no-op (DataMovement)"},
    {"to_host", "bits (DataMovement)"},
    {"from_host", "bits (DataMovement)"},
    {"gather_rows", "bits (DataMovement)"},
    {"store_rows", "bits, bf16 and f32 tables, a skipped row (DataMovement)"},
    {"load_rows", "bits, bf16 and f32 tables, rows of two tables interleaved (DataMovement)"},
    {"concat_cols", "bits, and each part where it belongs (ConcatCols)"},
    {"set_prompt_rows", "every comparison runs on cpu/amx+prompt too (for_each_cpu)"},
    {"linear", "f32: 2·K·u·Σ|x̂·ŵ|; bf16: bits unless exact ± K·u·Σ|x̂·ŵ| straddles a rounding boundary (Linear)"},
    {"linear_rows", "bits of the same backend's linear() over all of w, BF16 and F32 rows (LinearRows)"},
    {"grouped_linear", "as linear, per group (GroupedLinear)"},
    {"rms_norm", "bits (RmsNorm)"},
    {"head_rms_norm", "bits (HeadRmsNorm)"},
    {"rope", "bits (Rope)"},
    {"fake_quant_fp8", "bits (FakeQuantFp8)"},
    {"hadamard_fp4", "bits (HadamardFp4)"},
    {"scale", "bits (ElementWise)"},
    {"add", "bits (ElementWise)"},
    {"hc_pre", "bits on exactly summable data; else mixes 2·K·u·ρ·Σ|fn·x|, the rest propagated (HcPre)"},
    {"hc_post", "bits (HcPost)"},
    {"hc_head", "bits on exactly summable data; else the mixes' bound propagated (HcHead)"},
    {"stream_mean", "bits, and the closed form on exactly summable data (StreamMean)"},
    {"embed", "bits (Embed)"},
    {"sparse_attention", "score/exp errors propagated; bf16 steps may differ only near a boundary (SparseAttention)"},
    {"compressor_store", "bits (CompressorStore)"},
    {"compressor_pool", "bits (CompressorPool)"},
    {"indexer_select", "bits, scores and selection (IndexerSelect)"},
    {"moe_route", "bits (MoeRoute)"},
    {"moe_experts", "bits unless an expert's down projection straddles a bf16 boundary (MoeExperts)"},
    {"swiglu", "bits (ElementWise)"},
};

// Virtual functions declared in a header: the identifier before the '(' that follows `virtual`.
std::set<std::string> virtual_functions(const std::string& header) {
  std::ifstream in(header);
  EXPECT_TRUE(in.good()) << "cannot read " << header;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::set<std::string> names;
  static const std::regex decl(R"(virtual\s[^(;]*?([~\w]+)\s*\()");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), decl); it != std::sregex_iterator(); ++it)
    if ((*it)[1].str()[0] != '~') names.insert((*it)[1].str());
  return names;
}

TEST(BackendOps, EveryOpOfTheInterfaceIsCompared) {
  const std::string src = std::string(DSV4_TEST_DATA) + "/../../src/";
  std::set<std::string> ops = virtual_functions(src + "backend/backend.h");
  for (const std::string& f : virtual_functions(src + "core/device_memory.h")) ops.insert(f);
  ASSERT_TRUE(ops.count("linear") && ops.count("allocate")) << "the declarations were not found";
  ops.erase("name");            // not an op: it names the backend
  ops.erase("has_kernel_for");  // not an op: a question about linear's kernels (BackendOps.HasKernelFor)
  std::set<std::string> compared;
  for (const auto& [op, how] : kComparedOps) compared.insert(op);
  for (const std::string& op : ops) EXPECT_TRUE(compared.count(op)) << "op '" << op << "' has no comparison test";
  for (const std::string& op : compared) EXPECT_TRUE(ops.count(op)) << "'" << op << "' is not an op of backend.h";
  EXPECT_STREQ(reference().name(), "reference");
}

// Which weights linear() multiplies with kernels of their own: none on the reference backend; on
// the CPU every checkpoint format where a SIMD set is present, INT2 only with vdpbf16ps (and whole
// groups of 256 columns); the weight's bytes are not read.
TEST(BackendOps, HasKernelFor) {
  WeightView w;
  w.rows = 8;
  w.cols = 512;
  w.format = WeightFormat::BF16;
  EXPECT_FALSE(reference().has_kernel_for(w));
  const bool simd = cpu_features().has(CpuIsa::Avx2);
  EXPECT_EQ(CpuBackend(1).has_kernel_for(w), simd);
  EXPECT_FALSE(CpuBackend(1, CpuIsa::Reference).has_kernel_for(w));
  w.format = WeightFormat::INT2;
  w.scale_cols = 4;
  const bool bf16dot = cpu_features().has(CpuIsa::Avx512Bf16) && cpu_features().avx512_vnni;
  EXPECT_EQ(CpuBackend(1).has_kernel_for(w), bf16dot);
  EXPECT_FALSE(CpuBackend(1, CpuIsa::Avx2).has_kernel_for(w));
  w.cols = 384;  // groups of 128, not of 256
  w.scale_cols = 3;
  EXPECT_FALSE(CpuBackend(1).has_kernel_for(w));
}

TEST(BackendOps, Memory) {
  for (size_t bytes : {size_t(1), size_t(64), size_t(1000), size_t(1) << 20}) {
    void* p = reference().allocate(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes << " bytes";
    std::memset(p, 0xAB, bytes);
    reference().release(p);
  }
}

// Both backends read weights where they are: prepare leaves every view as it was.
TEST(BackendOps, Prepare) {
  std::vector<TestWeight> owned;
  for (WeightFormat f : {WeightFormat::F32, WeightFormat::BF16, WeightFormat::FP8, WeightFormat::FP4, WeightFormat::NVFP4,
                         WeightFormat::FP8F, WeightFormat::INT4})
    owned.push_back(make_weight(f, 3, 128, 1));
  auto run = [&](Backend& be) {
    std::vector<WeightView> views;
    for (const TestWeight& w : owned) views.push_back(w.view);
    std::vector<WeightView*> pointers;
    for (WeightView& v : views) pointers.push_back(&v);
    be.prepare(pointers);
    for (size_t i = 0; i < views.size(); ++i) {
      const WeightView &a = owned[i].view, &b = views[i];
      EXPECT_TRUE(a.format == b.format && a.rows == b.rows && a.cols == b.cols && a.data == b.data &&
                  a.scale == b.scale && a.scale_cols == b.scale_cols)
          << weight_format_name(a.format) << " view changed";
    }
  };
  run(reference());
  for_each_cpu(1, run);
}

TEST(BackendOps, DataMovement) {
  const int64_t rows = 7, cols = 129;
  std::vector<float> src = activations(rows * cols, 1);
  src[5] = std::numeric_limits<float>::quiet_NaN();
  src[6] = -0.0f;
  src[7] = 1.0f + 0x1p-20f;  // not a bf16 value: store_rows rounds it
  const std::vector<int64_t> pick = {6, 0, 3, 3, 1};
  auto run = [&](Backend& be) {
    std::vector<float> out;
    void* dev = be.allocate(src.size() * 4);
    Tensor t(dev, DType::F32, {rows, cols});
    be.from_host(t, src.data());
    be.synchronize();
    std::vector<float> back(src.size());
    be.to_host(t, back.data());
    out.insert(out.end(), back.begin(), back.end());
    std::vector<float> g(pick.size() * cols);
    Tensor tg = tensor(g, {int64_t(pick.size()), cols});
    be.gather_rows(t, pick, tg);
    out.insert(out.end(), g.begin(), g.end());
    for (DType dt : {DType::BF16, DType::F32}) {  // rows stored out of order, read back raw
      RowPool pool(be, dt, cols, 4);
      RowTable table(&pool);
      const std::vector<int64_t> at = {9, 2, 0, 5, 4, 3, 1};
      Tensor ts = tensor(src, {rows, cols});
      table.ensure_rows(10);  // (the caller reserves the rows)
      std::vector<RowTable*> tables(at.size(), &table);
      be.store_rows(tables, at, ts);
      for (int64_t r : at) {  // (rows 6..8 are addressable but were never written)
        const uint8_t* p = table.row(r);
        for (int64_t k = 0; k < cols; ++k)
          out.push_back(dt == DType::F32 ? reinterpret_cast<const float*>(p)[k]
                                         : bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[k]));
      }
      // load_rows from this table and a second one, interleaved, back into f32 rows.
      RowTable other(&pool);
      other.ensure_rows(3);
      std::vector<RowTable*> others(3, &other);
      std::vector<float> head(src.begin(), src.begin() + 4 * cols);
      Tensor first4 = tensor(head, {4, cols});
      others.insert(others.begin() + 1, nullptr);  // source row 1 is not stored
      be.store_rows(others, std::vector<int64_t>{2, 7, 0, 1}, first4);
      const std::vector<const RowTable*> from = {&table, &other, &table, &other, &table};
      const std::vector<int64_t> which = {4, 1, 9, 2, 0};
      std::vector<float> loaded(from.size() * cols);
      Tensor tl = tensor(loaded, {int64_t(from.size()), cols});
      be.load_rows(from, which, tl);
      out.insert(out.end(), loaded.begin(), loaded.end());
    }
    be.release(dev);
    return out;
  };
  const std::vector<float> want = run(reference());
  ASSERT_TRUE(std::equal(src.begin() + 8, src.end(), want.begin() + 8)) << "to_host(from_host(x)) != x";
  for_each_cpu(rows, [&](Backend& be) { EXPECT_TRUE(same_bits(want, run(be))); });
}

// scale, add (plain and broadcast over hc streams), swiglu (with and without the clamp), embed.
TEST(BackendOps, ElementWise) {
  for (int64_t n : {1, 3, 7}) {
    for (int64_t w : {1, 7, 129, 257}) {
      std::vector<float> a = activations(n * 4 * w, uint64_t(n * 1000 + w)), b = activations(n * 4 * w, uint64_t(w));
      std::vector<float> b1 = activations(n * w, uint64_t(w + 5));
      for (size_t i = 0; i < a.size(); i += 17) a[i] *= 40.0f;  // past the swiglu limit
      auto run = [&](Backend& be) {
        std::vector<float> out;
        std::vector<float> y(a.size());
        Tensor ta = tensor(a, {n, 4, w}), tb = tensor(b, {n, 4, w}), tb1 = tensor(b1, {n, w});
        Tensor ty = tensor(y, {n, 4, w});
        be.scale(ta, 0.37f, ty);
        out.insert(out.end(), y.begin(), y.end());
        be.add(ta, tb, ty);
        out.insert(out.end(), y.begin(), y.end());
        be.add(ta, tb1, ty);
        out.insert(out.end(), y.begin(), y.end());
        for (float limit : {0.0f, 10.0f}) {
          be.swiglu(ta, tb, limit, ty);
          out.insert(out.end(), y.begin(), y.end());
        }
        return out;
      };
      const std::vector<float> want = run(reference());
      for_each_cpu(n, [&](Backend& be) { EXPECT_TRUE(same_bits(want, run(be))) << "n=" << n << " w=" << w; });
    }
  }
}

TEST(BackendOps, Embed) {
  const int64_t V = 37;
  for (WeightFormat f : {WeightFormat::BF16, WeightFormat::F32})
    for (int64_t D : {1, 7, 129}) {
      const TestWeight table = weight_of(activations(V * D, uint64_t(D)), f, V);
      const std::vector<int32_t> tokens = {0, 36, 5, 5, 17};
      for (int64_t copies : {1, 4}) {
        auto run = [&](Backend& be) {
          std::vector<float> out(tokens.size() * size_t(copies * D));
          Tensor t = tensor(out, {int64_t(tokens.size()), copies, D});
          be.embed(table.view, tokens, copies, t);
          return out;
        };
        const std::vector<float> want = run(reference());
        for_each_cpu(5, [&](Backend& be) { EXPECT_TRUE(same_bits(want, run(be))) << "D=" << D; });
      }
      std::vector<float> out(static_cast<size_t>(D));
      Tensor t = tensor(out, {1, 1, D});
      const std::vector<int32_t> bad = {int32_t(V)};
      EXPECT_TRUE(throws_error([&] { reference().embed(table.view, bad, 1, t); }));
      for_each_cpu(1, [&](Backend& be) { EXPECT_TRUE(throws_error([&] { be.embed(table.view, bad, 1, t); })); });
    }
}

struct LinearCase {
  const char* name;
  WeightFormat format;
  ActQuant act;
  std::vector<int64_t> inputs;  // K values: the SIMD kernels' multiples and odd ones (scalar fallback)
};

// Not exact: the SIMD kernels sum the (exact) products in their lane order — and the FP8 ones merge
// the 128-blocks' sums into one — where the reference backend sums each scale block in its own
// order. So f32 outputs agree within the sums' error bound, and bf16 outputs bit for bit except
// where the exact value lies within that bound of a rounding boundary (product_bound).
TEST(BackendOps, Linear) {
  const std::vector<LinearCase> cases = {
      {"f32", WeightFormat::F32, ActQuant::ByWeight, {1, 7, 48, 129, 384}},
      {"bf16", WeightFormat::BF16, ActQuant::ByWeight, {3, 96, 257, 384}},
      {"fp8", WeightFormat::FP8, ActQuant::ByWeight, {128, 384}},
      {"fp8_unquantized", WeightFormat::FP8, ActQuant::None, {128, 257, 384}},
      {"fp4", WeightFormat::FP4, ActQuant::ByWeight, {128, 384}},
      {"fp4_unquantized", WeightFormat::FP4, ActQuant::None, {96, 128}},
      {"nvfp4", WeightFormat::NVFP4, ActQuant::ByWeight, {128, 384}},
      {"nvfp4_unquantized", WeightFormat::NVFP4, ActQuant::None, {48, 128}},
      {"fp8f", WeightFormat::FP8F, ActQuant::ByWeight, {128, 384}},
      {"fp8f_unquantized", WeightFormat::FP8F, ActQuant::None, {128, 257}},
      {"int4", WeightFormat::INT4, ActQuant::ByWeight, {128, 384}},  // W4A16: never quantizes
      {"int2", WeightFormat::INT2, ActQuant::None, {256, 384, 768}},  // W2A8 always (384: the scalar path)
  };
  for (const LinearCase& c : cases)
    for (int64_t K : c.inputs)
      for (int64_t M : {1, 3, 7, 129, 257}) {
        const TestWeight w = make_weight(c.format, M, K, uint64_t(K * 1000 + M));
        for (int64_t n : {1, 3, 7, 41}) {
          if (n == 41 && (M < 129 || K < 128)) continue;  // the many-row paths, on a few shapes
          const std::vector<float> x = activations(n * K, uint64_t(K + M + n));
          const bool quantize = c.act == ActQuant::ByWeight && (c.format == WeightFormat::FP8 ||
                                                                c.format == WeightFormat::FP4 ||
                                                                c.format == WeightFormat::NVFP4 ||
                                                                c.format == WeightFormat::FP8F);
          for (bool round : {true, false}) {
            SCOPED_TRACE(std::string(c.name) + " K=" + std::to_string(K) + " M=" + std::to_string(M) +
                         " n=" + std::to_string(n) + (round ? " bf16" : " f32"));
            auto run = [&](Backend& be) {
              std::vector<float> xin(x), y(size_t(n * M), NAN);
              Tensor tx = tensor(xin, {n, K}), ty = tensor(y, {n, M});
              be.linear(tx, w.view, ty, {c.act, round});
              return y;
            };
            const std::vector<float> want = run(reference());
            std::vector<double> bound(want.size());
            product_bound(x.data(), n, K, w.view, 0, M, quantize, round, M, bound);
            for_each_cpu(n, [&](Backend& be) { EXPECT_TRUE(within(want, run(be), bound)); });
          }
        }
      }
  // A mismatched width is an error, not a crash.
  const TestWeight w = make_weight(WeightFormat::BF16, 3, 8, 1);
  std::vector<float> x(14), y(6);
  Tensor tx = tensor(x, {2, 7}), ty = tensor(y, {2, 3});
  EXPECT_TRUE(throws_error([&] { reference().linear(tx, w.view, ty, {}); }));
}

// The rows a bounded argmax names are computed apart from the others: each value must be the
// one the same backend's full pass gives (model/argmax_head.h relies on it bit for bit).
TEST(BackendOps, LinearRows) {
  for (WeightFormat f : {WeightFormat::BF16, WeightFormat::F32})
    for (int64_t K : {64, 256, 384}) {
      const int64_t M = 301;
      const TestWeight w = make_weight(f, M, K, uint64_t(K + 7));
      const std::vector<float> x = activations(K, uint64_t(K + 11));
      const std::vector<int64_t> rows = {300, 0, 17, 18, 19, 250, 3, 17};  // any order, repeats allowed
      auto check = [&](Backend& be) {
        SCOPED_TRACE(std::string(be.name()) + " " + weight_format_name(f) + " K=" + std::to_string(K));
        std::vector<float> xin(x), all(size_t(M), NAN), some(rows.size(), NAN);
        Tensor tx = tensor(xin, {1, K}), ta = tensor(all, {1, M}), ts = tensor(some, {int64_t(rows.size()), 1});
        be.linear(tx, w.view, ta, {ActQuant::None, false});
        be.linear_rows(tx, w.view, rows, ts);
        for (size_t i = 0; i < rows.size(); ++i)
          EXPECT_EQ(std::bit_cast<uint32_t>(some[i]), std::bit_cast<uint32_t>(all[size_t(rows[i])])) << "row " << rows[i];
      };
      check(reference());
      for_each_cpu(1, check);
    }
  // A row outside the weight is an error, not a read past its end.
  const TestWeight w = make_weight(WeightFormat::BF16, 3, 64, 1);
  std::vector<float> x(64), y(1);
  Tensor tx = tensor(x, {1, 64}), ty = tensor(y, {1, 1});
  const std::vector<int64_t> bad = {3};
  for_each_cpu(1, [&](Backend& be) { EXPECT_TRUE(throws_error([&] { be.linear_rows(tx, w.view, bad, ty); })); });
}

// Not exact for the reason of Linear. Group g's inputs are columns [g·K, (g+1)·K) of x.
TEST(BackendOps, GroupedLinear) {
  struct Case {
    WeightFormat format;
    std::vector<int64_t> inputs;
  };
  const std::vector<Case> cases = {{WeightFormat::F32, {7, 48}},
                                   {WeightFormat::BF16, {129, 96}},
                                   {WeightFormat::FP8, {128, 257}},
                                   {WeightFormat::FP4, {128}},
                                   {WeightFormat::NVFP4, {128}},
                                   {WeightFormat::FP8F, {128, 257}},
                                   {WeightFormat::INT4, {128, 256}}};
  for (const Case& c : cases)
    for (int64_t K : c.inputs)
      for (int64_t groups : {1, 2, 3})
        for (int64_t per_group : {1, 7, 129}) {
          const int64_t M = groups * per_group;
          const TestWeight w = make_weight(c.format, M, K, uint64_t(K * 7 + M));
          for (int64_t n : {1, 3, 7}) {
            SCOPED_TRACE(std::string(weight_format_name(c.format)) + " K=" + std::to_string(K) + " groups=" +
                         std::to_string(groups) + " M=" + std::to_string(M) + " n=" + std::to_string(n));
            const std::vector<float> x = activations(n * groups * K, uint64_t(n + K + M));
            auto run = [&](Backend& be) {
              std::vector<float> xin(x), y(size_t(n * M), NAN);
              Tensor tx = tensor(xin, {n, groups * K}), ty = tensor(y, {n, M});
              be.grouped_linear(tx, w.view, groups, ty, {ActQuant::None, true});
              return y;
            };
            const std::vector<float> want = run(reference());
            std::vector<double> bound(want.size());
            for (int64_t g = 0; g < groups; ++g)
              product_bound(x.data() + g * K, n, groups * K, w.view, g * per_group, (g + 1) * per_group, false, true, M,
                            bound);
            for_each_cpu(n, [&](Backend& be) { EXPECT_TRUE(within(want, run(be), bound)); });
          }
        }
  // Quantized activations are refused by both (the model applies wo_a in bf16).
  const TestWeight w = make_weight(WeightFormat::FP8, 4, 128, 3);
  std::vector<float> x(256), y(4);
  Tensor tx = tensor(x, {1, 256}), ty = tensor(y, {1, 4});
  EXPECT_TRUE(throws_error([&] { reference().grouped_linear(tx, w.view, 2, ty, {}); }));
  for_each_cpu(1, [&](Backend& be) { EXPECT_TRUE(throws_error([&] { be.grouped_linear(tx, w.view, 2, ty, {}); })); });
}

}  // namespace
}  // namespace dsv4::test

// Indexer scores of compressed entries for one query row:
//   score(t) = bf16( Σ_h bf16( max(bf16(q_h·K_t), 0) · w_h ) )   (heads summed in order, in f32)
// with q_h·K_t as the reference computes it: per head an 8-lane partial sum of products (separate
// multiply and add), the lanes combined pairwise.
//
// Two kernels give the same bits:
// - index_scores: those steps, on f32 keys (any machine);
// - index_scores_amx: the dot products on the tile unit. The indexer's queries and keys are FP4
//   fake-quantized (values with at most two significant bits times power-of-two block scales), so
//   when their exponents span few enough binades every partial sum of the reference is exact in
//   f32 and any order of summation gives the same value. The kernel checks that per head and 16
//   entries (dot_is_exact) and takes the reference steps (reference_dot) where it does not hold.
#pragma once
#include <cstdint>
#include <vector>

namespace dsv4 {
class RowTable;
}

namespace dsv4::cpu {

void index_scores(const float* q, const float* w, int64_t heads, int64_t dim, const float* keys, int64_t t0, int64_t t1,
                  float* score);

// The reference's dot product of one head of q with one key (bf16), as index_scores takes it.
float reference_dot(const float* q, const uint16_t* key, int64_t dim);

// Whether every partial sum of a dot product of `dim` values is exact in f32 (and normal, and
// finite), given over its 32-value blocks b the largest exponent of a product's factors,
// hi = max_b(Eq_b + Ek_b), and the lowest bit of a product, lo = min_b(Lq_b + Lk_b) (E: exponent
// of a value's leading bit; L: of its lowest set bit). Reasoning in index_scores.cc.
bool dot_is_exact(int hi, int lo, int64_t dim);

// Exponents of a value block as dot_is_exact takes them: no nonzero value, and a value it cannot
// vouch for (more than two significant bits, subnormal, infinite or NaN).
constexpr int kEmptyHi = -4096, kEmptyLo = 4096;

// A query row prepared for index_scores_amx: its values as bf16 and, per 32-value block b and head
// h, E and L as above at [b·heads + h].
struct IndexQuery {
  const float* q = nullptr;  // [heads, dim] f32 (the reference steps of heads the check rejects)
  const float* w = nullptr;  // [heads] head weights
  int64_t heads = 0, dim = 0;
  bool narrow = true;        // every value has at most two significant bits and is normal or zero
  std::vector<uint16_t> bf16;
  std::vector<int32_t> hi, lo;
  std::vector<int32_t> hi_all, lo_all;  // per head, over all blocks
};
void prepare_index_query(const float* q, const float* w, int64_t heads, int64_t dim, IndexQuery& out);

// Scores of entries [t0, t1) of `keys` (bf16 rows of `dim`; t0 a multiple of 16) into score[t0, t1).
// Needs index_scores_amx_fits, AMX (CpuIsa::Amx) and q.narrow. Returns the number of (head, entry)
// dot products the check rejected (computed by reference_dot instead): a head is checked per 16 entries.
int64_t index_scores_amx(const IndexQuery& q, const RowTable& keys, int64_t t0, int64_t t1, float* score);
// The shapes index_scores_amx takes (heads a multiple of 16 up to 256, dim of 32 up to 1024).
bool index_scores_amx_fits(int64_t heads, int64_t dim);

}  // namespace dsv4::cpu

// Speculative rejection sampling (Leviathan et al. / Chen et al.): a draft token d drawn
// from q is kept with probability min(1, p(d)/q(d)); otherwise a replacement is drawn from
// the residual max(0, p − q) (renormalised). The kept-or-replaced token is distributed
// exactly as p, whatever q is.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace dsv4 {

// Returns true when `draft` is accepted; otherwise sets `replacement` from the residual.
bool accept_or_resample(std::span<const float> p, std::span<const float> q, int32_t draft, std::mt19937_64& rng,
                        int32_t& replacement, std::vector<float>& scratch);

}  // namespace dsv4

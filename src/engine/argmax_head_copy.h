// The 8-bit copy of the head behind the bounded greedy head (model/argmax_head.h): two INT4
// planes, hi the head quantized as the int4 draft head is (scale = amax / 7 per 128 inputs of a
// row, BF16), lo the residual w − hi at 1/16 of hi's scale, and each row's slack c_r. Made once
// when the engine opens (0.53 GB for V4-Flash, plus 4 bytes per row) from a BF16 or F32 head.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/weight_view.h"
#include "model/argmax_head.h"

namespace dsv4 {

class ArgmaxHeadCopy {
 public:
  // Whether `head` allows a copy (BF16 or F32, columns in groups of 128).
  static bool possible(const WeightView& head);
  ArgmaxHeadCopy(const WeightView& head, int threads = 0);
  ArgmaxHeadCopy(const ArgmaxHeadCopy&) = delete;
  ArgmaxHeadCopy& operator=(const ArgmaxHeadCopy&) = delete;

  WeightView& hi() { return hi_; }  // for Backend::prepare (which may move them)
  WeightView& lo() { return lo_; }
  ArgmaxHead view() const { return {hi_, lo_, slack_}; }
  // Frees the planes' bytes when the views no longer read them (a backend placed them elsewhere).
  void release_if_moved();

 private:
  std::vector<uint8_t> hi_codes_, hi_scales_, lo_codes_, lo_scales_;
  std::vector<float> slack_;
  WeightView hi_, lo_;
};

}  // namespace dsv4

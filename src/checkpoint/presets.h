// Presets of `dsv4 make-checkpoint`: a model configuration plus the kind of weights.
//
//   tiny              the golden tiny-a configuration, random weights
//   v4-flash          the real V4-Flash dimensions (default 2 target layers), random weights
//   v4-pro            the real V4-Pro dimensions (default 2 target layers: ratio 128, hash-routed)
//   tiny-pro          V4-Pro's layer pattern and proportions at tiny sizes, random weights
//   aligned           tiny dimensions, weights built so that target and MTP agree (aligned_weights.h)
//   aligned-v4-flash  V4-Flash dimensions, aligned weights
//   mirror            tiny dimensions, a context-dependent target and an MTP that mirrors its
//                     first layer: high but partial acceptance (mirror_weights.h)
//   mirror-v4-flash   V4-Flash dimensions (default 3 layers: window, CSA, HCA), mirror weights
//   tiny-dspark       the golden tiny-dspark-a configuration (V4-Flash-0731: a 3-stage DSpark
//                     drafter under mtp.0-2 instead of the MTP), random weights
//   mirror-dspark     mirror's target built with a weaker layer-0 attention (context 2.75: it then
//                     follows its successor most of the time) and a DSpark drafter that follows
//                     the successor: partial acceptance (mirror_dspark_weights.h)
//   mirror-dspark-v4-flash  V4-Flash-0731 dimensions (default 3 layers), mirror-dspark weights
//
// On DSpark presets --layers N keeps the drafter's stages (ratio-0 entries after the N target
// layers) and taps the last min(3, N) target layers unless --set dspark_target_layer_ids says.
//
// Configuration changes are applied to the preset's config.json before validation, so an
// invalid combination fails with the config's own message naming the key.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/config.h"

namespace dsv4 {

enum class WeightKind { Random, Aligned, Mirror, MirrorDSpark };

struct Preset {
  std::string name;
  std::string description;
  WeightKind weights = WeightKind::Random;
  ModelConfig config;                   // with the full layer pattern
  int64_t default_layers = 0;           // num_hidden_layers when --layers is not given
};

const std::vector<Preset>& presets();
const Preset& find_preset(const std::string& name);  // throws listing the known names

// The real DeepSeek-V4-Flash configuration (43 layers + 1 MTP layer).
ModelConfig v4_flash_config();
// The golden tiny-a configuration (4 layers + 1 MTP layer).
ModelConfig tiny_config();
// DeepSeek-V4-Pro (61 layers + 1 MTP layer: no window-only layers, the first two ratio-128 and
// hash-routed, top-k 1024, 128 heads in 16 output groups, 384 experts), and its shape at tiny sizes.
ModelConfig v4_pro_config();
ModelConfig tiny_pro_config();
// The mirror presets' configurations: tiny-a with room for long generations (4096
// positions); V4-Flash with the layer pattern window, CSA, HCA.
ModelConfig mirror_tiny_config();
ModelConfig mirror_v4_flash_config();
// DeepSeek-V4-Flash-0731's DSpark drafter (3 stages, block 5) on those: tiny-dspark-a's
// configuration (rank 64, noise 1000, taps 1,2,3); the mirror's tiny one; V4-Flash's (rank 256,
// noise 128799, taps 0,1,2 of the 3 layers).
ModelConfig tiny_dspark_config();
ModelConfig mirror_dspark_tiny_config();
ModelConfig mirror_dspark_v4_flash_config();

struct ConfigChanges {
  std::optional<int64_t> layers;                // first N entries of the preset's ratio pattern
  std::optional<std::vector<int64_t>> ratios;   // explicit kinds; the length sets the layer count
  std::vector<std::pair<std::string, std::string>> set;  // key (dotted for nested) = JSON text
};

// Parses "key=json_value" (a bare word that is not JSON is taken as a string).
std::pair<std::string, std::string> parse_set_option(const std::string& text);
// Parses "0,4,128".
std::vector<int64_t> parse_ratio_list(const std::string& text);

// The preset's configuration with the changes applied, validated.
ModelConfig build_config(const Preset& preset, const ConfigChanges& changes);

}  // namespace dsv4

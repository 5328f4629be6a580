// Presets of `dsv4 make-checkpoint`: a model configuration plus the kind of weights.
//
//   tiny              the golden tiny-a configuration, random weights
//   v4-flash          the real V4-Flash dimensions (default 2 target layers), random weights
//   aligned           tiny dimensions, weights built so that target and MTP agree (aligned_weights.h)
//   aligned-v4-flash  V4-Flash dimensions, aligned weights
//   mirror            tiny dimensions, a context-dependent target and an MTP that mirrors its
//                     first layer: high but partial acceptance (mirror_weights.h)
//   mirror-v4-flash   V4-Flash dimensions (default 3 layers: window, CSA, HCA), mirror weights
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

enum class WeightKind { Random, Aligned, Mirror };

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
// The mirror presets' configurations: tiny-a with room for long generations (4096
// positions); V4-Flash with the layer pattern window, CSA, HCA.
ModelConfig mirror_tiny_config();
ModelConfig mirror_v4_flash_config();

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

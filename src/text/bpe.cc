#include "text/bpe.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <stdexcept>

#include "text/byte_level.h"
#include "text/piece_cache.h"
#include "text/utf8.h"

namespace dsv4::text {

// Pair of symbol ids -> (rank, merged id), in an open-addressing table: merge lookups
// are the inner loop of encoding and std::unordered_map is several times slower here.
struct BpeModel::MergeTable {
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t merged_id = 0;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  std::vector<Slot> slots;
  uint64_t mask = 0;
  int shift = 64;

  static uint64_t key_of(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }

  explicit MergeTable(size_t expected) {
    size_t capacity = 16;
    while (capacity < expected * 2) capacity *= 2;
    slots.assign(capacity, Slot{});
    mask = capacity - 1;
    shift = 64 - std::countr_zero(capacity);
  }

  size_t home(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift); }

  // A pair listed twice keeps its last rank, like the reference's HashMap collect.
  void insert(int32_t left, int32_t right, int32_t rank, int32_t merged_id) {
    const uint64_t key = key_of(left, right);
    for (size_t i = home(key);; i = (i + 1) & mask) {
      if (slots[i].key == kEmpty || slots[i].key == key) {
        slots[i] = {key, rank, merged_id};
        return;
      }
    }
  }

  // Starts loading the slot of a pair that find() will look up shortly: the table is
  // megabytes, so lookups are cache misses, and overlapping them saves most of the wait.
  void prefetch(int32_t left, int32_t right) const { __builtin_prefetch(&slots[home(key_of(left, right))]); }

  const Slot* find(int32_t left, int32_t right) const {
    const uint64_t key = key_of(left, right);
    for (size_t i = home(key);; i = (i + 1) & mask) {
      if (slots[i].key == key) return &slots[i];
      if (slots[i].key == kEmpty) return nullptr;
    }
  }
};

BpeModel::BpeModel() : merges_(std::make_unique<MergeTable>(0)), cache_(std::make_unique<PieceCache>()) {
  std::fill(std::begin(byte_symbol_), std::end(byte_symbol_), -1);
}
BpeModel::~BpeModel() = default;
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;

namespace {

std::pair<std::string, std::string> merge_pair(const nlohmann::json& entry, size_t index) {
  const std::string where = "model.merges[" + std::to_string(index) + "]";
  if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
    return {entry[0].get<std::string>(), entry[1].get<std::string>()};
  }
  if (entry.is_string()) {
    // Legacy "left right" form: exactly one space, as in convert_merges_to_hashmap.
    const std::string line = entry.get<std::string>();
    const size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      throw std::invalid_argument(where + ": expected \"left right\", got \"" + line + "\"");
    }
    return {line.substr(0, space), line.substr(space + 1)};
  }
  throw std::invalid_argument(where + ": expected a string or a pair of strings, got " + entry.dump());
}

void reject_unsupported(const nlohmann::json& spec, const char* field, const char* what) {
  if (!spec.contains(field) || spec[field].is_null()) return;
  if (spec[field].is_boolean() && !spec[field].get<bool>()) return;
  if (spec[field].is_number() && spec[field].get<double>() == 0.0) return;
  throw std::invalid_argument(std::string("model.") + field + " = " + spec[field].dump() + ": " + what +
                              " is not supported");
}

}  // namespace

BpeModel BpeModel::from_json(const nlohmann::json& spec) {
  if (!spec.is_object()) throw std::invalid_argument("missing field 'model'");
  const std::string type = spec.contains("type") && spec["type"].is_string() ? spec["type"].get<std::string>() : "BPE";
  if (type != "BPE") throw std::invalid_argument("unsupported model type '" + type + "' (only BPE)");
  if (!spec.contains("vocab") || !spec["vocab"].is_object()) throw std::invalid_argument("missing field 'model.vocab'");
  if (!spec.contains("merges") || !spec["merges"].is_array()) throw std::invalid_argument("missing field 'model.merges'");
  reject_unsupported(spec, "dropout", "BPE dropout");
  reject_unsupported(spec, "byte_fallback", "byte fallback");
  reject_unsupported(spec, "continuing_subword_prefix", "a continuing-subword prefix");
  reject_unsupported(spec, "end_of_word_suffix", "an end-of-word suffix");

  BpeModel model;
  model.vocab_.reserve(spec["vocab"].size());
  for (const auto& [token, id] : spec["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      throw std::invalid_argument("model.vocab[\"" + token + "\"]: id " + id.dump() + " is not a valid token id");
    }
    model.vocab_.emplace(token, static_cast<int32_t>(id.get<int64_t>()));
  }

  const nlohmann::json& merges = spec["merges"];
  model.merges_ = std::make_unique<MergeTable>(merges.size());
  int32_t rank = 0;
  for (size_t i = 0; i < merges.size(); ++i) {
    if (merges[i].is_string() && merges[i].get_ref<const std::string&>().starts_with("#version")) continue;
    const auto pair = merge_pair(merges[i], i);
    const std::string& left = pair.first;  // (not a structured binding: clang 14 cannot capture those)
    const std::string& right = pair.second;
    const auto lookup = [&](const std::string& token) {
      const auto it = model.vocab_.find(token);
      if (it == model.vocab_.end()) {
        throw std::invalid_argument("model.merges[" + std::to_string(i) + "] (\"" + left + "\", \"" + right +
                                    "\"): token \"" + token + "\" is not in the vocabulary");
      }
      return it->second;
    };
    const int32_t left_id = lookup(left);
    const int32_t right_id = lookup(right);
    model.merges_->insert(left_id, right_id, rank++, lookup(left + right));
  }

  if (spec.contains("unk_token") && !spec["unk_token"].is_null()) {
    const std::string unk = spec["unk_token"].is_string() ? spec["unk_token"].get<std::string>() : "";
    const auto it = model.vocab_.find(unk);
    if (it == model.vocab_.end()) {
      throw std::invalid_argument("model.unk_token " + spec["unk_token"].dump() + " is not in the vocabulary");
    }
    model.unk_id_ = it->second;
  }
  const auto flag = [&](const char* field) {
    if (!spec.contains(field) || spec[field].is_null()) return false;
    if (!spec[field].is_boolean()) throw std::invalid_argument(std::string("model.") + field + " must be a boolean");
    return spec[field].get<bool>();
  };
  model.fuse_unk_ = flag("fuse_unk");
  model.ignore_merges_ = flag("ignore_merges");

  for (int b = 0; b < 256; ++b) {
    std::string character;
    append_utf8(character, byte_level_char(static_cast<uint8_t>(b)));
    const auto it = model.vocab_.find(character);
    model.byte_symbol_[b] = it == model.vocab_.end() ? -1 : it->second;
  }
  return model;
}

std::optional<int32_t> BpeModel::token_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::initial_symbols(std::string_view piece, bool raw_bytes, std::vector<int32_t>& symbols) const {
  // A character missing from the vocabulary becomes the unknown token when there is
  // one (consecutive ones fused if fuse_unk) and is dropped otherwise, as in the reference.
  bool unk_pending = false;
  const auto add = [&](int32_t id) {
    if (id >= 0) {
      if (unk_pending) symbols.push_back(*unk_id_);
      unk_pending = false;
      symbols.push_back(id);
    } else if (unk_id_) {
      if (unk_pending && !fuse_unk_) symbols.push_back(*unk_id_);
      unk_pending = true;
    }
  };
  if (raw_bytes) {
    for (const char c : piece) add(byte_symbol_[static_cast<uint8_t>(c)]);
  } else {
    size_t pos = 0;
    while (pos < piece.size()) {
      const size_t length = utf8_length_from_lead(static_cast<uint8_t>(piece[pos]));
      const auto it = vocab_.find(piece.substr(pos, length));
      add(it == vocab_.end() ? -1 : it->second);
      pos += length;
    }
  }
  if (unk_pending) symbols.push_back(*unk_id_);
}

void BpeModel::merge_all(std::vector<int32_t>& symbols) const {
  const size_t n = symbols.size();
  if (n < 2) return;
  // Doubly linked symbols plus a min-heap of candidate merges ordered by (rank, pos).
  // Entries go stale when a neighbour merges first; they are recognised and skipped
  // when popped, exactly like the reference.
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t merged_id;
    int32_t left, right;  // the pair it was made for
  };
  const auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  thread_local std::vector<Candidate> heap;
  thread_local std::vector<int32_t> prev, next;
  thread_local std::vector<uint8_t> removed;
  heap.clear();
  prev.resize(n);
  next.resize(n);
  removed.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  for (size_t i = 0; i + 1 < n; ++i) merges_->prefetch(symbols[i], symbols[i + 1]);
  for (size_t i = 0; i + 1 < n; ++i) {
    if (const auto* m = merges_->find(symbols[i], symbols[i + 1])) {
      heap.push_back({m->rank, static_cast<int32_t>(i), m->merged_id, symbols[i], symbols[i + 1]});
    }
  }
  std::make_heap(heap.begin(), heap.end(), later);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate top = heap.back();
    heap.pop_back();
    const int32_t pos = top.pos;
    if (removed[pos] || next[pos] < 0) continue;
    const int32_t right = next[pos];
    // Stale unless the pair there still merges into the same token (for the pair it
    // was made for, that is certain; another pair needs the lookup).
    if (symbols[pos] != top.left || symbols[right] != top.right) {
      const auto* current = merges_->find(symbols[pos], symbols[right]);
      if (!current || current->merged_id != top.merged_id) continue;
    }

    symbols[pos] = top.merged_id;
    removed[right] = 1;
    next[pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = pos;

    if (prev[pos] >= 0) {
      if (const auto* m = merges_->find(symbols[prev[pos]], symbols[pos])) {
        heap.push_back({m->rank, prev[pos], m->merged_id, symbols[prev[pos]], symbols[pos]});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
    if (next[pos] >= 0) {
      if (const auto* m = merges_->find(symbols[pos], symbols[next[pos]])) {
        heap.push_back({m->rank, pos, m->merged_id, symbols[pos], symbols[next[pos]]});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
  }
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!removed[i]) symbols[kept++] = symbols[i];
  }
  symbols.resize(kept);
}

void BpeModel::tokenize(std::string_view piece, bool raw_bytes, std::vector<int32_t>& ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    const std::string whole = raw_bytes ? byte_level_encode(piece) : std::string(piece);
    if (const auto it = vocab_.find(whole); it != vocab_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  const bool cacheable = piece.size() <= PieceCache::kMaxPieceBytes;
  if (cacheable && cache_->lookup(piece, ids)) return;
  thread_local std::vector<int32_t> symbols;
  symbols.clear();
  initial_symbols(piece, raw_bytes, symbols);
  merge_all(symbols);
  ids.insert(ids.end(), symbols.begin(), symbols.end());
  if (cacheable) cache_->insert(piece, symbols);
}

}  // namespace dsv4::text

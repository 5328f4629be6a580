#include "io/safetensors.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dsv4 {

using nlohmann::json;

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile(MappedFile(path)));
  f->parse_header();
  return f;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

namespace {

// Parses JSON, rejecting duplicate keys of the top-level object (nlohmann would keep the last).
json parse_rejecting_duplicates(const char* begin, const char* end, const std::string& file) {
  std::set<std::string> seen;
  std::string duplicate;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(begin, end, cb);
  } catch (const json::exception& e) {
    throw Error(cat(file, ": malformed safetensors header JSON: ", e.what()));
  }
  if (!duplicate.empty()) throw Error(cat(file, ": duplicate tensor name '", duplicate, "' in header"));
  return j;
}

bool mul_overflows(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }

}  // namespace

void SafetensorsFile::parse_header() {
  const std::string& file = map_.path();
  const size_t size = map_.size();
  DSV4_CHECK(size >= 8, file, ": truncated: ", size, " bytes, too short for the 8-byte header length");
  uint64_t header_len = 0;
  std::memcpy(&header_len, map_.data(), 8);
  DSV4_CHECK(header_len <= size - 8, file, ": header length ", header_len,
             " runs beyond the end of the file (", size, " bytes)");
  const char* hbegin = reinterpret_cast<const char*>(map_.data() + 8);
  json header = parse_rejecting_duplicates(hbegin, hbegin + header_len, file);
  DSV4_CHECK(header.is_object(), file, ": safetensors header is not a JSON object");

  const uint8_t* data_section = map_.data() + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  struct Range { uint64_t begin, end; size_t index; };
  std::vector<Range> ranges;

  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      DSV4_CHECK(entry.is_object(), file, ": __metadata__ is not an object");
      for (auto& [k, v] : entry.items())
        metadata_[k] = v.is_string() ? v.get<std::string>() : v.dump();
      continue;
    }
    auto where = [&, &name = name] { return cat(file, ": tensor '", name, "'"); };  // (a binding: clang 14 captures none)
    DSV4_CHECK(entry.is_object(), where(), ": entry is not an object");
    DSV4_CHECK(entry.contains("dtype") && entry["dtype"].is_string(), where(), ": missing dtype");
    DSV4_CHECK(entry.contains("shape") && entry["shape"].is_array(), where(), ": missing shape");
    DSV4_CHECK(entry.contains("data_offsets") && entry["data_offsets"].is_array() &&
                   entry["data_offsets"].size() == 2,
               where(), ": data_offsets must be [begin, end]");
    const std::string dtype_str = entry["dtype"].get<std::string>();
    auto dtype = parse_dtype(dtype_str);
    DSV4_CHECK(dtype.has_value(), where(), ": unknown dtype '", dtype_str, "'");

    TensorInfo t;
    t.name = name;
    t.dtype = *dtype;
    int64_t numel = 1;
    for (auto& d : entry["shape"]) {
      DSV4_CHECK(d.is_number_integer() && d.get<int64_t>() >= 0, where(),
                 ": shape entries must be non-negative integers, got ", d.dump());
      t.shape.push_back(d.get<int64_t>());
      DSV4_CHECK(!mul_overflows(numel, t.shape.back(), &numel), where(), ": shape overflows");
    }
    for (auto& o : entry["data_offsets"])
      DSV4_CHECK(o.is_number_unsigned() || (o.is_number_integer() && o.get<int64_t>() >= 0),
                 where(), ": data_offsets must be non-negative integers");
    uint64_t begin = entry["data_offsets"][0].get<uint64_t>();
    uint64_t end = entry["data_offsets"][1].get<uint64_t>();
    DSV4_CHECK(begin <= end, where(), ": data_offsets begin ", begin, " > end ", end);
    int64_t expected = 0;
    DSV4_CHECK(!mul_overflows(numel, int64_t(dtype_size(t.dtype)), &expected), where(),
               ": byte size overflows");
    DSV4_CHECK(end - begin == uint64_t(expected), where(), ": byte range [", begin, ", ", end,
               ") holds ", end - begin, " bytes but shape ", t.shape_string(), " x ",
               dtype_str, " needs ", expected);
    DSV4_CHECK(end <= data_size, where(), ": byte range [", begin, ", ", end,
               ") lies outside the data section (", data_size, " bytes; file truncated?)");
    t.data = data_section + begin;
    t.nbytes = size_t(end - begin);
    ranges.push_back({begin, end, tensors_.size()});
    tensors_.push_back(std::move(t));
  }

  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    const Range& a = ranges[i - 1];
    const Range& b = ranges[i];
    DSV4_CHECK(b.begin >= a.end || a.begin == a.end || b.begin == b.end, file, ": tensors '",
               tensors_[a.index].name, "' and '", tensors_[b.index].name,
               "' have overlapping byte ranges");
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    tensors_[i].file = &map_.path();
    by_name_[tensors_[i].name] = i;
  }
}

TensorStore TensorStore::open(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  TensorStore store;
  store.root_ = path;
  DSV4_CHECK(fs::exists(path), path.string(), ": no such file or directory");
  if (!fs::is_directory(path)) {
    store.files_.push_back(SafetensorsFile::open(path));
    for (auto& t : store.files_.back()->tensors()) store.by_name_[t.name] = &t;
    return store;
  }
  const fs::path index_path = path / "model.safetensors.index.json";
  if (!fs::exists(index_path)) {
    std::vector<fs::path> shards;
    for (auto& e : fs::directory_iterator(path))
      if (e.path().extension() == ".safetensors") shards.push_back(e.path());
    DSV4_CHECK(!shards.empty(), path.string(), ": no model.safetensors.index.json and no .safetensors file");
    DSV4_CHECK(shards.size() == 1, path.string(), ": ", shards.size(),
               " .safetensors files but no model.safetensors.index.json to list them");
    return open(shards[0]);
  }

  json index;
  {
    std::ifstream in(index_path);
    DSV4_CHECK(in.good(), index_path.string(), ": cannot read");
    try {
      index = json::parse(in);
    } catch (const json::exception& e) {
      throw Error(cat(index_path.string(), ": malformed JSON: ", e.what()));
    }
  }
  DSV4_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
             index_path.string(), ": missing \"weight_map\" object");
  std::map<std::string, size_t> shard_index;
  for (auto& [name, shard] : index["weight_map"].items()) {
    DSV4_CHECK(shard.is_string(), index_path.string(), ": weight_map entry '", name, "' is not a file name");
    const std::string shard_name = shard.get<std::string>();
    DSV4_CHECK(shard_name.find('/') == std::string::npos, index_path.string(), ": shard name '",
               shard_name, "' of tensor '", name, "' must be a file in the checkpoint directory");
    auto it = shard_index.find(shard_name);
    if (it == shard_index.end()) {
      const fs::path shard_path = path / shard_name;
      DSV4_CHECK(fs::exists(shard_path), index_path.string(), ": tensor '", name,
                 "' is listed in missing shard '", shard_name, "'");
      store.files_.push_back(SafetensorsFile::open(shard_path));
      it = shard_index.emplace(shard_name, store.files_.size() - 1).first;
    }
    const TensorInfo* t = store.files_[it->second]->find(name);
    DSV4_CHECK(t != nullptr, index_path.string(), ": tensor '", name, "' is listed in shard '",
               shard_name, "' but that shard does not contain it");
    store.by_name_[name] = t;
  }
  for (auto& f : store.files_)
    for (auto& t : f->tensors())
      DSV4_CHECK(store.by_name_.count(t.name) && store.by_name_[t.name] == &t, f->path(),
                 ": tensor '", t.name, "' is not listed in model.safetensors.index.json",
                 " (or listed in another shard)");
  return store;
}

const TensorInfo* TensorStore::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

const TensorInfo& TensorStore::get(const std::string& name) const {
  const TensorInfo* t = find(name);
  DSV4_CHECK(t != nullptr, root_.string(), ": missing tensor '", name, "'");
  return *t;
}

std::vector<const TensorInfo*> TensorStore::all() const {
  std::vector<const TensorInfo*> v;
  v.reserve(by_name_.size());
  for (auto& [n, t] : by_name_) v.push_back(t);
  std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->name < b->name; });
  return v;
}

uint64_t TensorStore::file_bytes() const {
  uint64_t total = 0;
  for (const auto& f : files_) total += f->mapping().size();
  return total;
}

void TensorStore::prefault(const std::function<void(size_t bytes)>& done) const {
  for (const auto& f : files_) f->mapping().prefault(done);
}

void TensorStore::prefault(const uint8_t* p, size_t bytes) const {
  for (const auto& f : files_)
    if (f->mapping().contains(p)) return f->mapping().prefault(p, bytes);
}

void TensorStore::drop_pages(const uint8_t* p, size_t bytes) const {
  for (const auto& f : files_)
    if (f->mapping().contains(p)) return f->mapping().drop_pages(p, bytes);
}

}  // namespace dsv4

#include "cache/state_file.h"

#include <cstring>

#include "core/error.h"

namespace dsv4 {

namespace {
constexpr uint64_t kMul = 0xff51afd7ed558ccdull;
uint64_t mix(uint64_t h, uint64_t w) {
  h ^= w * 0x9E3779B97F4A7C15ull;
  h = (h << 27) | (h >> 37);
  return h * kMul + 0x52dce729;
}
}  // namespace

void StreamHash::add(const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  count_ += n;
  while (n > 0 && tail_bytes_ > 0) {  // complete a partial word first
    tail_ |= uint64_t(*p++) << (8 * tail_bytes_);
    --n;
    if (++tail_bytes_ == 8) {
      h_ = mix(h_, tail_);
      tail_ = 0;
      tail_bytes_ = 0;
    }
  }
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h_ = mix(h_, w);
  }
  for (; n > 0; --n) tail_ |= uint64_t(*p++) << (8 * tail_bytes_++);
}

uint64_t StreamHash::value() const { return mix(mix(h_, tail_), count_); }

StateWriter::StateWriter(const std::filesystem::path& path) : path_(path), out_(path, std::ios::binary | std::ios::trunc) {
  DSV4_CHECK(out_.good(), path.string(), ": cannot open for writing");
}

void StateWriter::bytes(const void* data, size_t n) {
  hash_.add(data, n);
  out_.write(static_cast<const char*>(data), std::streamsize(n));
}

void StateWriter::put_ints(const std::vector<int32_t>& v) {
  put<uint64_t>(v.size());
  bytes(v.data(), v.size() * sizeof(int32_t));
}

void StateWriter::finish() {
  const uint64_t h = hash_.value();
  out_.write(reinterpret_cast<const char*>(&h), sizeof h);
  out_.flush();
  DSV4_CHECK(out_.good(), path_.string(), ": write failed (disk full or not writable?)");
  out_.close();
  DSV4_CHECK(!out_.fail(), path_.string(), ": write failed on close");
}

StateReader::StateReader(const std::filesystem::path& path) : path_(path), in_(path, std::ios::binary) {
  DSV4_CHECK(in_.good(), path.string(), ": cannot open");
}

void StateReader::bytes(void* data, size_t n) {
  in_.read(static_cast<char*>(data), std::streamsize(n));
  DSV4_CHECK(size_t(in_.gcount()) == n, path_.string(), ": truncated (", n, " bytes wanted at offset ",
             int64_t(in_.tellg() < 0 ? -1 : int64_t(in_.tellg())), ")");
  hash_.add(data, n);
}

std::vector<int32_t> StateReader::get_ints(int64_t most) {
  const uint64_t n = get<uint64_t>();
  DSV4_CHECK(n <= uint64_t(most), path_.string(), ": ", n, " values where at most ", most, " can be");
  std::vector<int32_t> v(n);
  bytes(v.data(), n * sizeof(int32_t));
  return v;
}

void StateReader::skip_to_checksum() {
  const auto here = in_.tellg();
  in_.seekg(0, std::ios::end);
  const int64_t end = int64_t(in_.tellg()) - int64_t(sizeof(uint64_t));
  in_.seekg(here);
  std::vector<char> buffer(1 << 20);
  for (int64_t left = end - int64_t(here); left > 0;) {
    const size_t n = size_t(std::min<int64_t>(left, int64_t(buffer.size())));
    bytes(buffer.data(), n);
    left -= int64_t(n);
  }
}

void StateReader::finish() {
  const uint64_t want = hash_.value();
  uint64_t stored = 0;
  in_.read(reinterpret_cast<char*>(&stored), sizeof stored);
  DSV4_CHECK(in_.gcount() == sizeof stored, path_.string(), ": truncated (no checksum)");
  DSV4_CHECK(stored == want, path_.string(), ": checksum mismatch (the file is corrupted)");
  char extra;
  DSV4_CHECK(!in_.read(&extra, 1), path_.string(), ": bytes after the checksum");
}

void write_table(StateWriter& w, const RowTable& t) {
  w.put<uint8_t>(t.attached());
  if (!t.attached()) return;
  const int64_t per = t.pool().rows_per_block(), first = t.first_kept_row(), size = t.size();
  w.put<int64_t>(int64_t(t.pool().row_bytes()));
  w.put<int64_t>(size);
  w.put<int64_t>(first);
  for (int64_t r = first; r < size;) {  // a block's rows are contiguous
    const int64_t n = std::min(size - r, per - r % per);
    w.bytes(t.row(r), size_t(n) * t.pool().row_bytes());
    r += n;
  }
}

void read_table(StateReader& r, RowTable& t) {
  const bool attached = r.get<uint8_t>() != 0;
  DSV4_CHECK(attached == t.attached(), r.path().string(), ": a cache table of another model");
  if (!attached) return;
  const int64_t row_bytes = r.get<int64_t>(), size = r.get<int64_t>(), first = r.get<int64_t>();
  DSV4_CHECK(row_bytes == int64_t(t.pool().row_bytes()) && size >= 0 && first >= 0 && first <= size &&
                 first % t.pool().rows_per_block() == 0 && size < (int64_t(1) << 40),
             r.path().string(), ": a cache table of rows of ", row_bytes, " bytes (", first, " to ", size,
             "); this model's are ", t.pool().row_bytes());
  t.clear();
  t.skip_to(first);
  t.ensure_rows(size);
  const int64_t per = t.pool().rows_per_block();
  for (int64_t i = first; i < size;) {
    const int64_t n = std::min(size - i, per - i % per);
    r.bytes(t.row(i), size_t(n) * t.pool().row_bytes());
    i += n;
  }
}

void write_cache(StateWriter& w, const SequenceCache& c) {
  for (size_t l = 0; l < c.num_layers(); ++l)
    DSV4_CHECK(c.layer(l).local, w.path().string(), ": layer ", l, " of this cache is another pipeline stage's: a "
               "staged run keeps its prefixes in memory only");
  w.put<int64_t>(c.length());
  w.put<int64_t>(c.min_truncate_length());
  w.put<uint8_t>(c.keeps_all_rows());
  w.put<uint32_t>(uint32_t(c.num_layers()));
  for (size_t l = 0; l < c.num_layers(); ++l) {
    const LayerCache& lc = c.layer(l);
    for (const RowTable* t : {&lc.kv, &lc.state, &lc.entries, &lc.index_state, &lc.index_keys}) write_table(w, *t);
  }
}

void read_cache(StateReader& r, SequenceCache& c) {
  for (size_t l = 0; l < c.num_layers(); ++l)
    DSV4_CHECK(c.layer(l).local, r.path().string(), ": layer ", l, " of this cache is another pipeline stage's: a "
               "staged run keeps its prefixes in memory only");
  const int64_t length = r.get<int64_t>(), min_length = r.get<int64_t>();
  const bool keep_all = r.get<uint8_t>() != 0;
  const uint32_t layers = r.get<uint32_t>();
  DSV4_CHECK(layers == c.num_layers() && length >= 0 && min_length >= 0 && min_length <= length, r.path().string(),
             ": a cache of ", layers, " layers and ", length, " tokens; this model's has ", c.num_layers(), " layers");
  for (size_t l = 0; l < c.num_layers(); ++l) {
    LayerCache& lc = c.layer(l);
    for (RowTable* t : {&lc.kv, &lc.state, &lc.entries, &lc.index_state, &lc.index_keys}) read_table(r, *t);
  }
  c.set_length(length);
  c.restore_min_truncate_length(min_length);
  c.keep_all_rows(keep_all);
}

}  // namespace dsv4

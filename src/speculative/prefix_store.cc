#include "speculative/prefix_store.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "speculative/prefix_cache.h"

namespace dsv4 {

namespace fs = std::filesystem;

namespace {
constexpr char kMagic[8] = {'D', 'S', 'V', '4', 'K', 'V', 'C', '\0'};

std::string hex(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016" PRIx64, v);
  return s;
}

uint64_t tokens_hash(const std::vector<int32_t>& tokens) {
  StreamHash h;
  h.add(tokens.data(), tokens.size() * sizeof(int32_t));
  return h.value();
}
}  // namespace

PrefixStore::PrefixStore(Options options, SpeculativeDecoder& decoder, Log log)
    : options_(std::move(options)), decoder_(decoder), log_(std::move(log)) {
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  DSV4_CHECK(fs::is_directory(options_.dir), options_.dir.string(), ": cannot create the kv cache directory",
             ec ? " (" + ec.message() + ")" : "");
  read_index();
}

std::string PrefixStore::prefix() const { return hex(options_.checkpoint) + "-"; }

// Header, then the first fields of the decoder's state: its tokens, the cache's length and
// the length it can be cut from.
std::optional<PrefixStore::File> PrefixStore::read_header(const fs::path& path) {
  try {
    StateReader r(path);
    char magic[8];
    r.bytes(magic, sizeof magic);
    DSV4_CHECK(std::memcmp(magic, kMagic, sizeof magic) == 0, path.string(), ": not a dsv4 kv cache file");
    const uint32_t version = r.get<uint32_t>();
    r.get<uint32_t>();
    DSV4_CHECK(version == kFormatVersion, path.string(), ": format version ", version, "; this build reads ",
               kFormatVersion);
    const uint64_t checkpoint = r.get<uint64_t>();
    DSV4_CHECK(checkpoint == options_.checkpoint, path.string(), ": written for another checkpoint");
    File f;
    f.path = path;
    f.tokens = r.get_ints(int64_t(1) << 31);
    f.length = r.get<int64_t>();
    f.min_length = r.get<int64_t>();
    DSV4_CHECK(f.length >= 0 && f.length < int64_t(f.tokens.size()) && f.min_length <= f.length, path.string(),
               ": a state of ", f.length, " rows for ", f.tokens.size(), " tokens");
    f.bytes = int64_t(fs::file_size(path));
    return f;
  } catch (const std::exception& e) {
    ++failures_;
    log_(std::string("kv cache: skipping and removing ") + e.what());
    std::error_code ec;
    fs::remove(path, ec);
    return std::nullopt;
  }
}

void PrefixStore::read_index() {
  std::vector<fs::path> ours;
  for (const auto& entry : fs::directory_iterator(options_.dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("." + prefix(), 0) == 0) {  // a write that never finished
      std::error_code ec;
      fs::remove(entry.path(), ec);
      log_("kv cache: removed an unfinished write, " + entry.path().string());
    } else if (name.rfind(prefix(), 0) == 0 && entry.path().extension() == ".kv") {
      ours.push_back(entry.path());
    }
  }
  // Oldest first, so that the most recently written is the most recently used.
  std::sort(ours.begin(), ours.end(), [](const fs::path& a, const fs::path& b) {
    std::error_code ea, eb;
    return fs::last_write_time(a, ea) < fs::last_write_time(b, eb);
  });
  for (const fs::path& p : ours)
    if (auto f = read_header(p)) {
      f->last_used = ++clock_;
      index_.push_back(std::move(*f));
    }
}

int64_t PrefixStore::bytes() const {
  int64_t n = 0;
  for (const File& f : index_) n += f.bytes;
  return n;
}

int64_t PrefixStore::best_cut(std::span<const int32_t> prompt) const {
  int64_t best = 0;
  for (const File& f : index_) best = std::max(best, usable_cut(f.tokens, f.length, f.min_length, prompt));
  return best;
}

std::optional<SequenceState> PrefixStore::load_best(std::span<const int32_t> prompt) {
  size_t pick = index_.size();
  int64_t best = 0;
  for (size_t i = 0; i < index_.size(); ++i) {
    const int64_t cut = usable_cut(index_[i].tokens, index_[i].length, index_[i].min_length, prompt);
    if (cut > best) {
      best = cut;
      pick = i;
    }
  }
  if (pick == index_.size()) return std::nullopt;
  try {
    StateReader r(index_[pick].path);
    char magic[8];
    r.bytes(magic, sizeof magic);
    DSV4_CHECK(std::memcmp(magic, kMagic, sizeof magic) == 0, index_[pick].path.string(), ": not a kv cache file");
    DSV4_CHECK(r.get<uint32_t>() == kFormatVersion, index_[pick].path.string(), ": another format version");
    r.get<uint32_t>();
    DSV4_CHECK(r.get<uint64_t>() == options_.checkpoint, index_[pick].path.string(), ": another checkpoint");
    SequenceState s = decoder_.load_state(r);
    DSV4_CHECK(s.tokens == index_[pick].tokens, index_[pick].path.string(), ": changed since it was indexed");
    index_[pick].last_used = ++clock_;
    std::error_code ec;
    fs::last_write_time(index_[pick].path, fs::file_time_type::clock::now(), ec);  // its age, for the next start
    ++loads_;
    return s;
  } catch (const std::exception& e) {
    drop(pick, std::string("kv cache: skipping and removing ") + e.what());
    return std::nullopt;
  }
}

void PrefixStore::drop(size_t i, const std::string& why) {
  ++failures_;
  log_(why);
  std::error_code ec;
  fs::remove(index_[i].path, ec);
  index_.erase(index_.begin() + std::ptrdiff_t(i));
}

void PrefixStore::save(const PrefixSource& state, const char* why) {
  if (!state.cache || int64_t(state.tokens.size()) < options_.min_tokens) return;
  const std::vector<int32_t> tokens(state.tokens.begin(), state.tokens.end());
  for (File& f : index_)
    if (f.tokens == tokens && f.length == state.cache->length()) {
      f.last_used = ++clock_;
      return;  // already on disk
    }
  const std::string name = prefix() + hex(tokens_hash(tokens)) + ".kv";
  const fs::path path = options_.dir / name;
  const fs::path temp = options_.dir / ("." + name + ".tmp-" + std::to_string(::getpid()));
  try {
    {
      StateWriter w(temp);
      w.bytes(kMagic, sizeof kMagic);
      w.put<uint32_t>(kFormatVersion);
      w.put<uint32_t>(0);
      w.put<uint64_t>(options_.checkpoint);
      decoder_.save_state(state, w);
      w.finish();
    }
    fs::rename(temp, path);
  } catch (const std::exception& e) {
    ++failures_;
    std::error_code ec;
    fs::remove(temp, ec);
    log_(std::string("kv cache: not written (") + why + "): " + e.what());
    return;
  }
  ++saves_;
  // Files it supersedes are replaced by it: those whose cuts it offers too but for at most the
  // last kSupersedeSlack tokens (a conversation's previous turn, whose last generated tokens the
  // client resent otherwise), if it can be cut wherever they could; and a file of the same name.
  for (size_t i = index_.size(); i-- > 0;) {
    const File& f = index_[i];
    const bool same = f.path == path;
    const int64_t shared = common_prefix(f.tokens, tokens);
    const bool superseded = shared - 1 >= f.length - kSupersedeSlack && state.cache->min_truncate_length() <= f.min_length;
    if (!same && !superseded) continue;
    std::error_code ec;
    if (!same) fs::remove(f.path, ec);
    index_.erase(index_.begin() + std::ptrdiff_t(i));
  }
  File f;
  f.path = path;
  f.tokens = tokens;
  f.length = state.cache->length();
  f.min_length = state.cache->min_truncate_length();
  std::error_code ec;
  f.bytes = int64_t(fs::file_size(path, ec));
  f.last_used = ++clock_;
  index_.push_back(std::move(f));
  enforce_budget(path);
}

void PrefixStore::enforce_budget(const fs::path& keep) {
  while (bytes() > options_.max_bytes && index_.size() > 1) {
    size_t oldest = index_.size();
    for (size_t i = 0; i < index_.size(); ++i)
      if (index_[i].path != keep && (oldest == index_.size() || index_[i].last_used < index_[oldest].last_used))
        oldest = i;
    if (oldest == index_.size()) return;
    std::error_code ec;
    fs::remove(index_[oldest].path, ec);
    index_.erase(index_.begin() + std::ptrdiff_t(oldest));
  }
}

}  // namespace dsv4

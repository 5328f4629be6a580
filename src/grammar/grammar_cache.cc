#include "grammar/grammar_cache.h"

#include <future>
#include <list>
#include <map>
#include <mutex>
#include <utility>

namespace dsv4::grammar {
namespace {

using Key = std::pair<const TokenVocabulary*, std::string>;
using Compiled = std::shared_ptr<const CompiledGrammar>;

struct Entry {
  std::shared_future<Compiled> result;
  std::shared_ptr<const TokenVocabulary> vocab;  // keeps the key's pointer from being reused
  std::list<const Key*>::iterator lru;           // position in Cache::order
  size_t bytes = 0;                              // 0 while compiling
  bool ready = false;
};

struct Cache {
  std::mutex mutex;
  std::map<Key, Entry> entries;
  std::list<const Key*> order;  // most recently used first
  size_t bytes = 0;
  int64_t hits = 0, compiles = 0;

  void touch(Entry& e) { order.splice(order.begin(), order, e.lru); }

  // Drops least recently used compiled grammars while over either bound (never the one just
  // added, never one still compiling: its waiters hold its future).
  void evict(const Key* keep) {
    for (auto it = order.end(); it != order.begin() && (entries.size() > kGrammarCacheEntries || bytes > kGrammarCacheBytes);) {
      --it;
      const Key* key = *it;
      Entry& e = entries.at(*key);
      if (key == keep || !e.ready) continue;
      bytes -= e.bytes;
      it = order.erase(it);
      entries.erase(*key);
    }
  }
};

Cache& cache() {
  static Cache c;
  return c;
}

// The memory a compiled grammar's masks take: its per-top token sets and its own cache of
// computed masks (allocated whole with the grammar).
size_t footprint(const CompiledGrammar& g) {
  return g.memory_bytes() + CompiledGrammar::kMaxCachedMasks * g.mask_words() * 8;
}

}  // namespace

Compiled compile_grammar_cached(const std::string& gbnf, std::shared_ptr<const TokenVocabulary> vocab) {
  Cache& c = cache();
  Key key{vocab.get(), gbnf};
  std::promise<Compiled> promise;
  {
    std::unique_lock lock(c.mutex);
    if (auto it = c.entries.find(key); it != c.entries.end()) {
      ++c.hits;
      c.touch(it->second);
      std::shared_future<Compiled> result = it->second.result;
      lock.unlock();
      return result.get();  // waits while another thread compiles it; rethrows its error
    }
    auto [it, added] = c.entries.emplace(std::move(key), Entry{});
    Entry& e = it->second;
    e.result = promise.get_future().share();
    e.vocab = vocab;
    c.order.push_front(&it->first);
    e.lru = c.order.begin();
    ++c.compiles;
  }
  Compiled compiled;
  try {
    compiled = std::make_shared<const CompiledGrammar>(parse_gbnf(gbnf), vocab);
  } catch (...) {
    promise.set_exception(std::current_exception());  // waiters see the error too
    std::lock_guard lock(c.mutex);
    const auto it = c.entries.find(Key{vocab.get(), gbnf});
    c.order.erase(it->second.lru);
    c.entries.erase(it);  // an error is not cached: the next call compiles (and reports) again
    throw;
  }
  promise.set_value(compiled);
  std::lock_guard lock(c.mutex);
  const auto it = c.entries.find(Key{vocab.get(), gbnf});
  it->second.ready = true;
  it->second.bytes = footprint(*compiled);
  c.bytes += it->second.bytes;
  c.evict(&it->first);
  return compiled;
}

GrammarCacheStats grammar_cache_stats() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  return {c.entries.size(), c.bytes, c.hits, c.compiles};
}

void clear_grammar_cache() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  for (auto it = c.entries.begin(); it != c.entries.end();) {
    if (!it->second.ready) {  // compiling: its thread finds it again when done
      ++it;
      continue;
    }
    c.bytes -= it->second.bytes;
    c.order.erase(it->second.lru);
    it = c.entries.erase(it);
  }
  c.hits = c.compiles = 0;
}

}  // namespace dsv4::grammar

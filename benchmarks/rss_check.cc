// Peak resident memory of a generation run against the weight bytes it touched: runs what
// `dsv4 generate --draft K` runs (greedy, ignoring EOS), then reads /proc/self: the peak RSS
// (VmHWM), the resident pages of the mapped checkpoint shards (the weights actually touched;
// mapped weights count only where touched) and the anonymous memory (caches, workspaces).
//
//   rss_check MODEL [--prompt-tokens 1,2,...] [--max-new-tokens N] [--draft K] [--threads N]
#include <cstdio>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/engine.h"
#include "speculative/speculative_decoder.h"

using namespace dsv4;

namespace {

int64_t status_kb(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key + ":", 0) == 0) return std::atoll(line.c_str() + key.size() + 1);
  return -1;
}

// Resident kB of mappings whose path ends with ".safetensors".
int64_t mapped_weights_kb() {
  std::ifstream f("/proc/self/smaps");
  std::string line;
  bool weights = false;
  int64_t kb = 0;
  while (std::getline(f, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') != std::string::npos &&
        line.find(':') == std::string::npos) {
      weights = line.size() > 12 && line.compare(line.size() - 12, 12, ".safetensors") == 0;
    } else if (line.rfind("Rss:", 0) == 0) {
      if (weights) kb += std::atoll(line.c_str() + 4);
    } else if (line.find(".safetensors") != std::string::npos) {
      weights = true;
    }
  }
  return kb;
}

// Whether each 4 KiB page of [p, p + bytes) is present in this process's page tables.
class PageMap {
 public:
  PageMap() : f_("/proc/self/pagemap", std::ios::binary) {}
  int64_t present_pages(const void* p, int64_t bytes) {
    const uint64_t first = reinterpret_cast<uint64_t>(p) / 4096, last = (reinterpret_cast<uint64_t>(p) + bytes - 1) / 4096;
    std::vector<uint64_t> e(last - first + 1);
    f_.seekg(int64_t(first * 8));
    f_.read(reinterpret_cast<char*>(e.data()), int64_t(e.size() * 8));
    int64_t n = 0;
    for (uint64_t v : e) n += (v >> 63) & 1;
    return n;
  }
  int64_t pages(const void* p, int64_t bytes) {
    return int64_t((reinterpret_cast<uint64_t>(p) + bytes - 1) / 4096 - reinterpret_cast<uint64_t>(p) / 4096 + 1);
  }

 private:
  std::ifstream f_;
};

int64_t view_bytes(const WeightView& w) {
  return int64_t(w.bytes());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: rss_check MODEL [--prompt-tokens 1,2,..] [--max-new-tokens N] [--draft K]\n");
    return 2;
  }
  std::string prompt = "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16";
  int64_t new_tokens = 32;
  int draft = 2, threads = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--prompt-tokens") prompt = argv[i + 1];
    else if (a == "--max-new-tokens") new_tokens = std::atoll(argv[i + 1]);
    else if (a == "--draft") draft = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
  }
  std::vector<std::vector<int32_t>> prompts(1);
  std::stringstream ss(prompt);
  for (std::string t; std::getline(ss, t, ',');) prompts[0].push_back(int32_t(std::atol(t.c_str())));
  auto engine = Engine::open(argv[1], {{BackendKind::Cpu, threads}, draft > 0, 0, 16});
  SpeculativeDecoder decoder(*engine->target, engine->proposer.get());
  GenerateOptions o;
  o.max_new_tokens = new_tokens;
  o.draft_tokens = draft;
  decoder.generate(prompts, o);
  const int64_t hwm = status_kb("VmHWM"), anon = status_kb("RssAnon"), file = status_kb("RssFile");
  const int64_t weights = mapped_weights_kb();
  // Weights the run used: every dense tensor, the routed experts with at least half their pages
  // present (a fault maps up to 64 KiB around it, so an unused expert shows a few pages at most),
  // and the embedding rows present.
  PageMap pm;
  const ModelWeights& mw = engine->files->weights;
  int64_t used = 0, experts_used = 0, experts_total = 0;
  auto add_tensor = [&](const WeightView& w) { if (w.present()) used += view_bytes(w); };
  auto add_block = [&](const BlockWeights& b) {
    for (const WeightView* w : {&b.hc_attn.fn, &b.hc_attn.base, &b.hc_attn.scale, &b.hc_ffn.fn, &b.hc_ffn.base,
                                &b.hc_ffn.scale, &b.attn_norm, &b.ffn_norm, &b.attn.attn_sink, &b.attn.wq_a,
                                &b.attn.q_norm, &b.attn.wq_b, &b.attn.wkv, &b.attn.kv_norm, &b.attn.wo_a, &b.attn.wo_b,
                                &b.ffn.gate, &b.ffn.bias, &b.ffn.shared.w1, &b.ffn.shared.w2, &b.ffn.shared.w3})
      add_tensor(*w);
    if (b.attn.compressor)
      for (const WeightView* w : {&b.attn.compressor->ape, &b.attn.compressor->wkv, &b.attn.compressor->wgate,
                                  &b.attn.compressor->norm})
        add_tensor(*w);
    if (b.attn.indexer)
      for (const WeightView* w : {&b.attn.indexer->wq_b, &b.attn.indexer->weights_proj, &b.attn.indexer->compressor.ape,
                                  &b.attn.indexer->compressor.wkv, &b.attn.indexer->compressor.wgate,
                                  &b.attn.indexer->compressor.norm})
        add_tensor(*w);
    if (b.ffn.tid2eid.present()) used += 4096;  // a few rows
    for (const ExpertWeights& e : b.ffn.experts) {
      ++experts_total;
      if (2 * pm.present_pages(e.w1.data, e.w1.rows * (e.w1.cols / 2)) >= pm.pages(e.w1.data, e.w1.rows * (e.w1.cols / 2))) {
        ++experts_used;
        used += view_bytes(e.w1) + view_bytes(e.w2) + view_bytes(e.w3);
      }
    }
  };
  for (const BlockWeights& b : mw.layers) add_block(b);
  for (const MtpWeights& m : mw.mtp) {
    add_block(m.block);
    for (const WeightView* w : {&m.e_proj, &m.h_proj, &m.enorm, &m.hnorm, &m.norm, &m.hc_head.fn, &m.hc_head.base,
                                &m.hc_head.scale})
      add_tensor(*w);
  }
  for (const WeightView* w : {&mw.head, &mw.norm, &mw.hc_head.fn, &mw.hc_head.base, &mw.hc_head.scale}) add_tensor(*w);
  used += pm.present_pages(mw.embed.data, int64_t(mw.embed.bytes())) * 4096;
  std::printf("weights used: %.1f MB (%lld of %lld routed experts)\n", used / 1048576.0, (long long)experts_used,
              (long long)experts_total);
  std::printf("peak RSS %.1f MB = %.3f x the weights used; now resident: mapped shards %.1f MB, other files %.1f MB, "
              "anonymous %.1f MB\n",
              hwm / 1024.0, double(hwm) * 1024.0 / double(used), weights / 1024.0, (file - weights) / 1024.0,
              anon / 1024.0);
  return 0;
}

// One forward pass over a batch of sequences: the rows (tokens at positions), the
// sequences they belong to, scratch memory, and an optional tracer that records named
// intermediates ("L0.prefill.q") under the golden data's names and layouts.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cache/sequence_cache.h"
#include "core/workspace.h"

namespace dsv4 {

class Tracer {
 public:
  struct Entry {
    DType dtype = DType::F32;  // F32 or I64
    std::vector<int64_t> shape;
    std::vector<float> f32;
    std::vector<int64_t> i64;
  };
  void record(const std::string& name, const Tensor& t, Backend& be);
  const Entry* find(const std::string& name) const;
  const std::map<std::string, Entry>& entries() const { return entries_; }
  void clear() { entries_.clear(); }

 private:
  std::map<std::string, Entry> entries_;
};

struct Pass {
  Pass(Backend& backend, Workspace& workspace, Tracer* t = nullptr) : be(backend), ws(workspace), tracer(t) {}

  Backend& be;
  Workspace& ws;
  Tracer* tracer = nullptr;
  std::string phase = "prefill";          // the golden names' phase: prefill | decode

  std::vector<SequenceCache*> sequences;  // one per batch entry
  std::vector<int32_t> tokens;            // per row
  std::vector<int64_t> positions;         // per row
  std::vector<int32_t> sequence_of_row;   // per row, index into `sequences`

  int64_t prompt_rows = 0;                // rows [0, prompt_rows) are a prompt's (Backend::set_prompt_rows)

  int64_t rows() const { return int64_t(tokens.size()); }

  // Adds a sequence's next tokens as rows at positions length..length+n-1 (checking the
  // ids against `vocab` and the end against `max_positions`); the rows whose logits are
  // wanted (all, the last, or none) are appended to `logit_rows`. The phase is "prefill"
  // while every sequence starts at position 0.
  void add_sequence(SequenceCache* sequence, std::span<const int32_t> new_tokens, bool all_logits, bool no_logits,
                    int64_t vocab, int64_t max_positions, std::vector<int64_t>& logit_rows);
  // add_sequence for each request of a forward call (the target's or the MTP's: any type
  // with sequence, tokens, all_logits, no_logits), recording where each request's rows and
  // logits rows begin.
  template <class Request>
  void add_requests(std::span<const Request> requests, int64_t vocab, int64_t max_positions,
                    std::vector<int64_t>& rows_begin, std::vector<int64_t>& logits_begin,
                    std::vector<int64_t>& logit_rows) {
    rows_begin.clear();
    logits_begin.clear();
    for (const Request& r : requests) {
      rows_begin.push_back(rows());
      logits_begin.push_back(int64_t(logit_rows.size()));
      add_sequence(r.sequence, r.tokens, r.all_logits, r.no_logits, vocab, max_positions, logit_rows);
    }
  }
  // After the pass: each sequence has grown by its rows; rows no rollback can need are released.
  void commit_sequences();
  // The same pass over rows `rows` (ascending) only: for the part of a block whose outputs only
  // those rows need, after every row has extended the caches. Never committed itself. Its prompt
  // rows are those of `rows` below prompt_rows (still a prefix).
  Pass subset(std::span<const int64_t> rows) const;
  LayerCache& cache(int64_t row, size_t layer) const {
    return sequences[size_t(sequence_of_row[size_t(row)])]->layer(layer);
  }
  Tensor alloc(std::initializer_list<int64_t> dims) { return ws.alloc_f32(dims); }
  Tensor alloc_i32(std::initializer_list<int64_t> dims) { return ws.alloc(DType::I32, dims); }

  bool tracing() const { return tracer != nullptr; }
  // Records `t` as "<scope>.<phase>.<name>" when tracing.
  void trace(const std::string& scope, const std::string& name, const Tensor& t) const {
    if (tracer) tracer->record(scope + "." + phase + "." + name, t, be);
  }
};

// Tells the backend which rows of the ops run while it lives are a prompt's (its prompt kernels
// may round differently: every kind of row keeps one sequence of operations), and sets `after`
// when it ends (also on errors).
class PromptRowsScope {
 public:
  PromptRowsScope(Backend& be, int64_t rows, int64_t after = 0) : be_(be), after_(after) { be_.set_prompt_rows(rows); }
  ~PromptRowsScope() { end(); }
  PromptRowsScope(const PromptRowsScope&) = delete;
  PromptRowsScope& operator=(const PromptRowsScope&) = delete;
  void end() { be_.set_prompt_rows(after_); }

 private:
  Backend& be_;
  int64_t after_;
};

}  // namespace dsv4

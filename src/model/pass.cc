#include "model/pass.h"

#include "core/error.h"

namespace dsv4 {

void Tracer::record(const std::string& name, const Tensor& t, Backend& be) {
  Entry& e = entries_[name];
  e.shape.assign(t.shape.begin(), t.shape.begin() + t.ndim);
  if (t.dtype == DType::I32) {
    std::vector<int32_t> v(size_t(t.numel()));
    be.to_host(t, v.data());
    e.dtype = DType::I64;
    e.i64.assign(v.begin(), v.end());
    e.f32.clear();
  } else {
    e.dtype = DType::F32;
    e.f32.resize(size_t(t.numel()));
    be.to_host(t, e.f32.data());
    e.i64.clear();
  }
}

void Pass::add_sequence(SequenceCache* sequence, std::span<const int32_t> new_tokens, bool all_logits,
                        bool no_logits, int64_t vocab, int64_t max_positions, std::vector<int64_t>& logit_rows) {
  DSV4_CHECK(sequence && !new_tokens.empty(), "forward: request ", sequences.size(), " has no tokens");
  const int64_t start = sequence->length(), end = start + int64_t(new_tokens.size());
  DSV4_CHECK(end <= max_positions, "sequence of ", end, " tokens exceeds the context limit (max_position_embeddings = ",
             max_positions, ")");
  if (start != 0) phase = "decode";
  const int32_t index = int32_t(sequences.size());
  sequences.push_back(sequence);
  for (size_t t = 0; t < new_tokens.size(); ++t) {
    const int32_t token = new_tokens[t];
    DSV4_CHECK(token >= 0 && token < vocab, "token id ", token, " is outside the vocabulary (", vocab, " tokens)");
    if (!no_logits && (all_logits || t + 1 == new_tokens.size())) logit_rows.push_back(rows());
    tokens.push_back(token);
    positions.push_back(start + int64_t(t));
    sequence_of_row.push_back(index);
  }
}

void Pass::commit_sequences() {
  std::vector<int64_t> added(sequences.size(), 0);
  for (int32_t s : sequence_of_row) ++added[size_t(s)];
  for (size_t i = 0; i < sequences.size(); ++i) {
    sequences[i]->set_length(sequences[i]->length() + added[i]);
    sequences[i]->release_unneeded();
  }
}

Pass Pass::subset(std::span<const int64_t> rows) const {
  Pass q(be, ws, tracer);
  q.phase = phase;
  q.sequences = sequences;
  for (int64_t r : rows) {
    DSV4_CHECK(r >= 0 && r < this->rows(), "pass subset: row ", r, " of ", this->rows());
    q.tokens.push_back(tokens[size_t(r)]);
    q.positions.push_back(positions[size_t(r)]);
    q.sequence_of_row.push_back(sequence_of_row[size_t(r)]);
    if (r < prompt_rows) ++q.prompt_rows;
  }
  return q;
}

const Tracer::Entry* Tracer::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace dsv4

// Continuing a finished sequence (a chat's next turn): with GenerateOptions::keep_state a
// sequence keeps its target and MTP caches when it finishes, and extend() appends the next
// turn's tokens and prefills only those. Checked against plain greedy decoding written out by
// hand on one target sequence (the first prompt as a prompt pass, every generated token as a
// one-token pass, the next turn as a prompt pass, ...): the same tokens, with and without
// drafting; the prefill covers only the new tokens; the MTP drafts on after each turn with
// the logits of a fresh MTP chain over the whole sequence (its state lines up with the target's).
#include <gtest/gtest.h>

#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

// Plain greedy decoding of the turns, each a prompt pass then one-token passes until it has
// `new_tokens[i]` tokens; every token of the sequence and the target's streams at each.
struct ByHand {
  std::vector<std::vector<int32_t>> generated;  // per turn
  std::vector<int32_t> all;                     // the whole sequence
  std::vector<float> hidden;                    // [processed positions, hc·D]
};
ByHand greedy_by_hand(Transformer& target, const std::vector<std::vector<int32_t>>& turns,
                      const std::vector<int64_t>& new_tokens) {
  auto seq = target.new_sequence();
  Transformer::Output out;
  const int64_t V = target.config().vocab_size;
  ByHand h;
  auto pass = [&](std::span<const int32_t> tokens, bool prompt) {
    Transformer::Request r{seq.get(), tokens, false, false, prompt};
    target.forward(std::span(&r, 1), out);
    const std::vector<float> rows = out.hidden_host();
    h.hidden.insert(h.hidden.end(), rows.begin(), rows.end());
    return argmax_token({out.logits_row(0), size_t(V)});
  };
  for (size_t t = 0; t < turns.size(); ++t) {
    std::vector<int32_t> prompt;
    if (t > 0) prompt.push_back(h.generated.back().back());  // generated, not yet processed
    prompt.insert(prompt.end(), turns[t].begin(), turns[t].end());
    h.all.insert(h.all.end(), turns[t].begin(), turns[t].end());
    std::vector<int32_t> tokens = {pass(prompt, true)};
    while (int64_t(tokens.size()) < new_tokens[t]) tokens.push_back(pass({&tokens.back(), 1}, false));
    h.all.insert(h.all.end(), tokens.begin(), tokens.end());
    h.generated.push_back(std::move(tokens));
  }
  return h;
}

struct Turn {
  SequenceOutput out;
  DecodeMetrics metrics;
};

std::vector<Turn> run_turns(SpeculativeDecoder& decoder, const std::vector<std::vector<int32_t>>& turns,
                            const std::vector<int64_t>& new_tokens, int draft) {
  GenerateOptions o;
  o.draft_tokens = draft;
  o.keep_state = true;
  o.record_steps = true;
  std::vector<Turn> result;
  SpeculativeDecoder::SequenceId id = 0;
  for (size_t t = 0; t < turns.size(); ++t) {
    o.max_new_tokens = new_tokens[t];
    decoder.reset_metrics();
    if (t == 0) id = decoder.add(turns[0], o);
    else decoder.extend(id, turns[t], o);
    while (!decoder.finished(id)) decoder.step();
    EXPECT_EQ(decoder.output(id).finish, FinishReason::Length);
    result.push_back({decoder.output(id), decoder.metrics()});
  }
  decoder.cancel(id);
  decoder.release(id);
  return result;
}

TEST(Continuation, NextTurnsPrefillOnlyTheirTokensAndDecodeAsOneSequence) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  const std::vector<std::vector<int32_t>> turns = {test::random_prompt(40, V, 31), test::random_prompt(9, V, 32),
                                                   test::random_prompt(150, V, 33)};
  const std::vector<int64_t> new_tokens = {24, 30, 20};
  const ByHand want = greedy_by_hand(*engine->target, turns, new_tokens);
  for (int draft : {0, 3}) {
    SCOPED_TRACE("draft " + std::to_string(draft));
    SpeculativeDecoder decoder(*engine->target, engine->proposer.get());
    decoder.set_prefill_chunk(64);  // the third turn in chunks, its MTP rows computed as they come
    const auto got = run_turns(decoder, turns, new_tokens, draft);
    for (size_t t = 0; t < turns.size(); ++t) {
      EXPECT_EQ(got[t].out.tokens, want.generated[t]) << "turn " << t;
      // Turn 0 prefills its prompt; later turns the previous turn's last token and their own.
      EXPECT_EQ(got[t].metrics.prefill_rows, int64_t(turns[t].size()) + (t ? 1 : 0)) << "turn " << t;
      EXPECT_EQ(got[t].metrics.prompt_tokens, int64_t(turns[t].size())) << "turn " << t;
    }
    if (draft == 0) continue;
    // The MTP went on from where it was: every draft's logits are those of a fresh MTP chain
    // over the whole sequence's streams.
    int64_t compared = 0;
    for (size_t t = 1; t < turns.size(); ++t) {
      EXPECT_GT(got[t].metrics.drafted, 10) << "turn " << t;
      for (const StepRecord& st : got[t].out.steps) {
        if (st.drafts.empty()) continue;
        const auto chain = test::mtp_chain(*engine, want.hidden, want.all, st.position, st.drafts);
        for (size_t d = 0; d < st.drafts.size(); ++d, ++compared)
          ASSERT_TRUE(test::same_bits(st.draft_logits.data() + d * size_t(V), chain[d].data(), size_t(V)))
              << "turn " << t << ", position " << st.position << ": draft " << d + 1 << " logits";
      }
    }
    EXPECT_GT(compared, 30);
  }
  // Every block is back once the sequences are gone.
  EXPECT_EQ(engine->target->pools().blocks_in_use(), 0);
  EXPECT_EQ(engine->mtp->pools().blocks_in_use(), 0);
}

TEST(Continuation, RefusesWhatCannotBeContinued) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  SpeculativeDecoder decoder(*engine->target, engine->proposer.get());
  GenerateOptions o;
  o.max_new_tokens = 3;
  const std::vector<int32_t> more = {1, 2, 3};
  const auto plain = decoder.add(test::random_prompt(8, V, 1), o);  // no keep_state
  EXPECT_THROW(decoder.extend(plain, more, o), Error);              // still running
  while (!decoder.finished(plain)) decoder.step();
  EXPECT_THROW(decoder.extend(plain, more, o), Error);  // its caches are gone
  o.keep_state = true;
  const auto kept = decoder.add(test::random_prompt(8, V, 2), o);
  while (!decoder.finished(kept)) decoder.step();
  EXPECT_GT(engine->target->pools().blocks_in_use(), 0);  // kept
  EXPECT_THROW(decoder.extend(kept, std::vector<int32_t>{}, o), Error);
  EXPECT_THROW(decoder.extend(kept, std::vector<int32_t>{int32_t(V)}, o), Error);
  GenerateOptions drafting = o;
  drafting.draft_tokens = 2;
  EXPECT_THROW(decoder.extend(kept, more, drafting), Error);  // began without an MTP state
  decoder.extend(kept, more, o);                              // the refusals changed nothing
  while (!decoder.finished(kept)) decoder.step();
  EXPECT_EQ(decoder.output(kept).tokens.size(), 3u);
  decoder.cancel(kept);
  EXPECT_EQ(engine->target->pools().blocks_in_use(), 0);
  EXPECT_THROW(decoder.extend(kept, more, o), Error);  // cancelled
}

}  // namespace
}  // namespace dsv4

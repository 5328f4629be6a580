// How many drafts to verify (`--draft auto`): the number that maximizes the expected tokens per
// second of a step, from each draft's chance of surviving and the measured costs of this machine.
//
// A step of m sequences that verifies n_i drafts of sequence i yields Σ_i (1 + S_i1 + ... + S_in_i)
// tokens on average, where S_ij is the chance that drafts 1..j are all accepted, and costs the draft
// time plus one target pass of Σ_i (1 + n_i) rows. Each S_ij is the product of per-draft survivals
// s_i1 · ... · s_ij: the proposer's own estimate where it has one (DSpark's confidence head), else
// the acceptance by position measured on the sequence, with the process's history as a prior.
// Since S_ij falls with j, the best drafts to verify for any total are the largest S_ij across the
// batch, so the choice is exact for this model: sort them, and take the prefix with the highest
// rate (a batch's sequences share the pass, and the choice knows it). Once the drafts are made
// their cost is paid: a further draft is verified when the tokens it adds beat what its rows' time
// earns at the long-run rate (the better of that best rate and plain decoding's), which is the
// same prefix where drafting pays and a shorter one where it does not. Before drafting the rate,
// with predicted survivals, says whether drafting pays at all this step (and, for a proposer whose
// cost grows per draft, how deep to draft). Where it does not by the mean acceptance but does by
// its optimistic end (one standard error above, from the sequence's trials: optimistic_survival),
// the drafts that bound pays for are verified — a measurement while the evidence is thin (of the
// position in doubt, the first or a deeper one), which stops as it accumulates.
// Where it does not but would if every draft were accepted, a probe step still drafts after
// `probe_every` plain steps, then after twice as many (up to 64x) while drafting keeps not paying,
// so acceptance keeps being measured at a cost that shrinks — and never before the plain steps
// since the last draft have taken 1/kProbeShare times what the probe is expected to cost (its
// draft, its verified row, and the drafter's rows queued since the last draft, up to a window,
// each at its measured cost): on a shallow checkpoint, where a drafter row is several percent of
// a decode step, probes come a few hundred steps apart; on a deep one, every few dozen. A probe's
// first draft is verified whatever the model expects of it. Once a probe's outcome makes drafting
// pay, the plan drafts again and the interval starts over.
//
// A proposer's survivals are calibrated against what verification finds: per draft position, the
// drafts accepted over the sum of the survivals predicted for them (both counted where the drafts
// before were accepted), a factor that scales the next predictions (a confidence head trained on
// other text, or one that carries no information, still gives the right verify lengths on
// average; the factor starts at 1 and moves with the evidence).
//
// Costs are learned from the passes the decoder runs, per number of rows in the pass (and of
// drafted sequences), as medians of recent passes; counts never measured are interpolated
// linearly between measured ones, and the choice takes every count as somewhat cheaper the less
// it has been measured (CostCurve::hopeful), so that it gets tried. The rest of a step (the
// proposer told of the verdicts, sampling) is a moving average, added to every step's time.
// Until two pass sizes are known the scheduler calibrates: after a few plain steps (kWarmUpSteps)
// it verifies two drafts of one sequence of the batch (kMeasuringDrafts), then nothing, once each.
// Measuring steps (the calibration, probes) draft for one sequence of a batch, in turn: a drafting
// sequence first computes its drafter's queued rows, which every sequence of a batch paid for one
// step's measurement.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "speculative/proposer.h"

namespace dsv4 {

// Acceptance by draft position, conditional: hits[j] of trials[j] steps that verified draft j+1
// with drafts 1..j accepted accepted it too.
struct AcceptanceHistory {
  std::vector<int64_t> trials, hits;
  void record(int drafted, int accepted);
  void add(const AcceptanceHistory& other);
  // The chance draft j+1 survives, given the earlier ones did: this history's rate, shrunk toward
  // `prior` (its rate with one accepted pseudo-trial: 1 where unknown) with the weight of a few trials.
  double survival(size_t j, const AcceptanceHistory* prior) const;
  // survival() plus one standard error of a rate measured on this history's trials at j: the most
  // the evidence so far makes likely (it closes in on survival() as trials accumulate).
  double optimistic_survival(size_t j, const AcceptanceHistory* prior) const;
};

// Time as a function of a count (pass rows, drafted sequences): the median of its last 15
// measurements where measured; linear between them, the nearest two's slope beyond (never
// below the last known value's share).
class CostCurve {
 public:
  void record(int64_t count, double seconds);
  bool known(int64_t count) const;
  int64_t measured_points() const;
  double at(int64_t count) const;  // 0 when nothing is measured
  // What the choice uses: at(), less a share that shrinks as measurements accumulate (10% where
  // never measured, 5% after one, ...). Optimism in the face of uncertainty: a count the
  // interpolation or one early measurement makes look a little dear still gets tried, and its
  // measurement then decides (without it, auto kept verifying 4 drafts on the strength of a
  // straight line through 1 and 5 rows where 3 paid 5% more).
  double hopeful(int64_t count) const;
  static constexpr double kHope = 0.10;
  // (count, seconds) of every measured count, ascending.
  std::vector<std::pair<int64_t, double>> points() const;

 private:
  static constexpr int64_t kRecent = 15;
  std::vector<double> seconds_;               // [count]: the estimate (0 = never measured)
  std::vector<std::vector<double>> recent_;   // [count]: the last kRecent measurements
  std::vector<int64_t> samples_;              // [count]: how many measurements in all
};

class VerifyScheduler {
 public:
  struct Options {
    int max_drafts = 5;
    DraftProposer::Cost cost = DraftProposer::Cost::Once;
    int probe_every = 8;  // steps that decided not to draft before one drafts anyway
    int64_t window = 0;   // the drafter's window (rows a probe's catch-up computes at most; 0: none)
  };
  explicit VerifyScheduler(Options options);

  // Before drafting: drafts to ask of each sequence (limits[i]: the most it may have; 0 = none).
  std::vector<int> plan(std::span<const AcceptanceHistory* const> sequences, std::span<const int> limits);
  // After drafting: how many of each sequence's drafts to verify (its survivals, else predicted).
  std::vector<int> select(std::span<const AcceptanceHistory* const> sequences, std::span<const Draft* const> drafts);

  // A target pass of `rows` rows without prompt rows; a draft call for `sequences` sequences to `depth`.
  // After freeze_costs() both are ignored: the costs recorded so far are the model (reproducible
  // choices, for tests and for measuring the scheduler itself).
  void record_pass(int64_t rows, double seconds);
  void record_draft(int64_t sequences, int depth, double seconds);
  // A draft call that also computed `rows` queued drafter rows (the MTP's rows of the plain steps
  // since the sequences last drafted): its time less a draft's, per row, is what a probe's catch-up
  // costs. (Kept until a steady draft of that size is known, then turned into a per-row cost.)
  void record_catch_up(int64_t rows, int64_t sequences, int depth, double seconds);
  double catch_up_row_seconds() const;  // 0 until measured
  // The rest of a decode step (telling the proposer, sampling, emitting): paid by every step,
  // plain or not, so it dilutes what verification gains and belongs in the rate.
  void record_overhead(double seconds);
  // A sequence's verification: into its history and the process's; `survival`, the proposer's
  // predictions for the verified drafts (may be empty), into the calibration.
  void record_step(AcceptanceHistory& sequence, int drafted, int accepted, std::span<const float> survival = {});
  // A pass of prompt rows alone (a prefill step): the seconds of one prompt row through the target,
  // kept by the pass's size (powers of two): a row of a 2-token prompt reads the weights for two
  // rows and costs several times a row of a 160-token one, and one estimate for both made a
  // long prompt's window look three times dearer than it is after a few short prompts.
  void record_prompt_pass(int64_t rows, double seconds);
  // Per row, in a prompt pass of about `rows` rows (the nearest size measured); 0 until measured.
  double prompt_row_seconds(int64_t rows) const;
  // The sequences of a decode pass: their recent mean is the batch a new sequence will likely share
  // (one that arrives first and alone is usually joined by others).
  void record_batch(int64_t sequences);
  double typical_batch() const { return typical_batch_; }  // 0 until a decode pass
  // The seconds drafting is expected to save a batch of `batch` sequences per token it decodes,
  // each sequence drafting with the process's acceptance so far at the best verify lengths: the
  // batch's seconds per token plain, less drafting's (0 where drafting does not pay).
  double seconds_saved_per_token(int64_t batch) const;
  // The factor the proposer's survival at draft position j + 1 is scaled by (1 without evidence).
  double calibration(size_t j) const;
  void freeze_costs() { frozen_ = true; }

  const CostCurve& pass_cost() const { return pass_; }
  const CostCurve& draft_cost() const { return draft_; }  // per drafted sequence count (Once) or per depth unit (PerDraft)
  const AcceptanceHistory& history() const { return history_; }
  bool calibrating() const { return pass_.measured_points() < 2; }
  // What the cost model expected of the verify lengths it chose (steps past calibration):
  // accepted drafts, and the seconds per token of those steps and of plain steps in their place.
  struct Expectation {
    int64_t steps = 0;         // sequence steps that verified drafts
    double accepted = 0;       // Σ expected accepted drafts over them
    double seconds = 0, plain_seconds = 0;  // Σ per selection: 1 / expected rate, 1 / plain rate
    double gain() const { return seconds > 0 ? plain_seconds / seconds : 1.0; }
  };
  const Expectation& expectation() const { return expected_; }
  int64_t plain_steps() const { return plain_steps_; }  // steps planned without drafts
  int64_t uncertain_steps() const { return uncertain_steps_; }  // a draft (or one deeper) only the bound pays for

  // The expected rate (tokens/s) of verifying, per sequence, the prefix counts `n` of cumulative
  // survivals `cumulative` (exposed for tests).
  double expected_rate(std::span<const std::vector<double>> cumulative, std::span<const int> n,
                       int64_t drafted_sequences, int depth) const;

 private:
  // The counts that maximize the expected rate given each sequence's cumulative survivals.
  std::vector<int> best(std::span<const std::vector<double>> cumulative, bool sunk_draft, int64_t drafted,
                        int depth) const;
  double draft_seconds(int64_t sequences, int depth) const;
  bool could_pay(std::span<const int> ask) const;
  bool uncertain(std::span<const AcceptanceHistory* const> sequences, std::span<const int> ask,
                 std::vector<int>& n) const;
  std::vector<int> one_of(std::vector<int> ask);
  std::vector<std::vector<double>> cumulative_survivals(std::span<const AcceptanceHistory* const> sequences,
                                                        std::span<const int> ask, bool optimistic) const;
  // Where drafting pays: one draft deeper for each sequence whose next position pays by its
  // optimistic survival but not by the mean (a position tried once and failed, after the
  // calibration say, stayed at an even chance, below break-even, and was never verified again:
  // auto verified 1 draft where 2 paid 1.2x). The plan's depth and explore_ record it; select()
  // verifies it. Trials there close the bound in on the mean, and exploration stops.
  // Also where the next position has been tried rarely (rarely_tried) and would pay if accepted.
  void deeper(std::span<const AcceptanceHistory* const> sequences, std::span<const int> ask, std::vector<int>& n);
  static bool rarely_tried(const AcceptanceHistory& h, size_t j);
  bool would_pay_if_accepted(const std::vector<std::vector<double>>& mean, const std::vector<int>& n, size_t i) const;
  // What a measuring step verifies (the calibration, a probe): drafts of one sequence, so that its
  // pass has 1 + this many rows. Two, not all offered: on a CPU a pass of n rows reads the union of their experts, so 3 rows cost
  // about as much as 2 and the line through 1 and 3 rows is all the choice needs to start (counts
  // beyond are tried where they look like paying, and measured then); the old 5-row pass with 4
  // drafts was 2.3% of a 160-token run on random weights, where no draft is ever accepted.
  static constexpr int kMeasuringDrafts = 2;
  // Plain steps before the calibration: the first decode steps after a prompt run up to a third
  // slower (caches cold after the prefill), and a pass measured once then stayed the estimate of
  // its size (a 3-row pass at 190-203 ms, against 150 later, and a plain-decoding run).
  static constexpr int64_t kWarmUpSteps = 2;
  static constexpr int64_t kMaxProbeFactor = 64;  // the longest probe interval, in probe_every
  // What probes may cost at most, as a share of the plain decoding time they interrupt.
  static constexpr double kProbeShare = 0.015;
  bool probe_affordable(int64_t batch) const;
  void settle_catch_up() const;
  double step_seconds(int64_t rows, double draft) const { return draft + pass_.hopeful(rows) + overhead_; }

  Options options_;
  CostCurve pass_, draft_, prompt_row_;  // (prompt_row_: per row, at bit_width(rows))
  struct CatchUp {
    int64_t rows, sequences;
    int depth;
    double seconds;
  };
  mutable std::vector<CatchUp> catch_up_pending_;  // waiting for a steady draft of their size
  mutable CostCurve catch_up_row_;                 // per queued row, at count 1
  AcceptanceHistory history_;
  std::vector<double> predicted_, observed_;  // per draft position: Σ survival predicted, drafts accepted
  double overhead_ = 0, typical_batch_ = 0;
  Expectation expected_;
  int64_t steps_ = 0, since_draft_ = 0, plain_steps_ = 0, uncertain_steps_ = 0, probe_interval_ = 0;
  std::vector<int> explore_;  // [sequence of the planned batch]: the depth select() verifies at least
  size_t measured_turn_ = 0;  // the sequence (index in the batch) the next measuring step drafts for
  bool calibrated_deep_ = false, frozen_ = false, probing_ = false;
};

}  // namespace dsv4

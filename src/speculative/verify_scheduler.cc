#include "speculative/verify_scheduler.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace dsv4 {

// ---- acceptance by position

void AcceptanceHistory::record(int drafted, int accepted) {
  if (drafted <= 0) return;
  if (trials.size() < size_t(drafted)) {
    trials.resize(size_t(drafted), 0);
    hits.resize(size_t(drafted), 0);
  }
  // Drafts 1..accepted survived; draft accepted+1 (if verified) was tried and rejected.
  for (int j = 0; j < drafted && j <= accepted; ++j) {
    ++trials[size_t(j)];
    if (j < accepted) ++hits[size_t(j)];
  }
}

void AcceptanceHistory::add(const AcceptanceHistory& o) {
  trials.resize(std::max(trials.size(), o.trials.size()), 0);
  hits.resize(trials.size(), 0);
  for (size_t j = 0; j < o.trials.size(); ++j) {
    trials[j] += o.trials[j];
    hits[j] += o.hits[j];
  }
}

double AcceptanceHistory::survival(size_t j, const AcceptanceHistory* prior) const {
  // The prior's own rate with one accepted pseudo-trial: optimistic where little is known (with an
  // even chance, a sequence whose first drafts were all accepted still decoded plainly for its
  // first probe intervals: the deeper drafts that would have paid were never tried). A position
  // the prior has never verified takes the rate of its deepest verified one, as acceptance falls
  // with depth (1 where nothing is verified): counted as certain, a drafter whose first drafts all
  // failed looked as likely to pass 4 drafts as 1, and auto verified 4 again after the calibration
  // (a 5-row pass where rows are dear: 10% of a short run on random weights).
  // This history is pulled toward it with the weight of two trials (a sequence's first steps
  // lean on the process's experience).
  double p0 = 1.0;
  if (prior) {
    size_t k = std::min(j + 1, prior->trials.size());
    while (k > 0 && prior->trials[k - 1] == 0) --k;
    if (k > 0) p0 = (double(prior->hits[k - 1]) + 1.0) / (double(prior->trials[k - 1]) + 1.0);
  }
  constexpr double kWeight = 2.0;
  if (j >= trials.size()) return p0;
  return (double(hits[j]) + kWeight * p0) / (double(trials[j]) + kWeight);
}

double AcceptanceHistory::optimistic_survival(size_t j, const AcceptanceHistory* prior) const {
  constexpr double kWeight = 2.0;  // (survival()'s: the prior counts as that many trials)
  const double s = survival(j, prior), n = (j < trials.size() ? double(trials[j]) : 0.0) + kWeight;
  return std::min(1.0, s + std::sqrt(s * (1.0 - s) / n));
}

// ---- costs

void CostCurve::record(int64_t count, double seconds) {
  if (count <= 0 || !(seconds > 0)) return;
  if (seconds_.size() <= size_t(count)) {
    seconds_.resize(size_t(count) + 1, 0.0);
    recent_.resize(size_t(count) + 1);
    samples_.resize(size_t(count) + 1, 0);
  }
  // The median of the last kRecent: the machine's speed drifts, and a step now and then takes
  // far longer (the process descheduled, a page fault): a mean let such outliers lift the cost
  // of the counts run most (plain steps, 1 row) by 10%, which on a checkpoint where one draft
  // loses 7% against plain decoding decided for drafting.
  std::vector<double>& r = recent_[size_t(count)];
  const int64_t n = samples_[size_t(count)]++;
  if (r.size() < size_t(kRecent)) r.push_back(seconds);
  else r[size_t(n % kRecent)] = seconds;
  std::array<double, kRecent> sorted;  // (on the stack: this runs every step)
  const size_t m = r.size();
  std::copy(r.begin(), r.end(), sorted.begin());
  std::sort(sorted.begin(), sorted.begin() + long(m));
  seconds_[size_t(count)] = m % 2 ? sorted[m / 2] : 0.5 * (sorted[m / 2 - 1] + sorted[m / 2]);
}

bool CostCurve::known(int64_t count) const {
  return count > 0 && size_t(count) < seconds_.size() && seconds_[size_t(count)] > 0;
}

int64_t CostCurve::measured_points() const {
  return std::count_if(seconds_.begin(), seconds_.end(), [](double s) { return s > 0; });
}

std::vector<std::pair<int64_t, double>> CostCurve::points() const {
  std::vector<std::pair<int64_t, double>> p;
  for (size_t i = 0; i < seconds_.size(); ++i)
    if (seconds_[i] > 0) p.emplace_back(int64_t(i), seconds_[i]);
  return p;
}

double CostCurve::hopeful(int64_t count) const {
  const int64_t n = known(count) ? samples_[size_t(count)] : 0;
  return at(count) * (1.0 - kHope / double(1 + n));
}

double CostCurve::at(int64_t count) const {
  if (known(count)) return seconds_[size_t(count)];
  const auto p = points();
  if (p.empty()) return 0.0;
  auto above = std::lower_bound(p.begin(), p.end(), std::make_pair(count, 0.0));
  auto line = [count](const std::pair<int64_t, double>& a, const std::pair<int64_t, double>& b) {
    const double slope = std::max(0.0, (b.second - a.second) / double(b.first - a.first));
    return a.second + slope * double(count - a.first);
  };
  if (above != p.end() && above != p.begin()) return line(*(above - 1), *above);  // between two
  if (p.size() == 1) return p[0].second * double(count) / double(p[0].first);     // one point: proportional
  if (above == p.end()) return std::max(p.back().second, line(p[p.size() - 2], p.back()));  // beyond the last
  return std::max(0.0, line(p[0], p[1]));                                           // before the first
}

// ---- the choice

VerifyScheduler::VerifyScheduler(Options options) : options_(options), probe_interval_(options.probe_every) {
  DSV4_CHECK(options_.max_drafts > 0 && options_.probe_every > 0, "verify scheduler: max_drafts and probe_every ",
             "must be positive");
}

void VerifyScheduler::record_pass(int64_t rows, double seconds) {
  if (!frozen_) pass_.record(rows, seconds);
}

void VerifyScheduler::record_draft(int64_t sequences, int depth, double seconds) {
  if (frozen_ || depth <= 0 || sequences <= 0) return;
  draft_.record(sequences, options_.cost == DraftProposer::Cost::Once ? seconds : seconds / depth);
  if (!catch_up_pending_.empty()) settle_catch_up();
}

void VerifyScheduler::record_catch_up(int64_t rows, int64_t sequences, int depth, double seconds) {
  if (frozen_ || rows <= 0 || sequences <= 0 || depth <= 0 || !(seconds > 0)) return;
  catch_up_pending_.push_back({rows, sequences, depth, seconds});
  settle_catch_up();
}

// A catch-up's time less the draft it came with, per row, once a steady draft of that many
// sequences has been timed (until then the pending ones wait: the first catch-up, a prompt's last
// window, comes before any steady draft). Only the most recent few are kept pending.
void VerifyScheduler::settle_catch_up() const {
  if (catch_up_pending_.empty() || !draft_.known(catch_up_pending_.back().sequences)) {
    if (catch_up_pending_.size() > 8) catch_up_pending_.erase(catch_up_pending_.begin());
    return;
  }
  std::vector<CatchUp> waiting;
  for (const CatchUp& c : catch_up_pending_) {
    if (!draft_.known(c.sequences)) {
      waiting.push_back(c);
      continue;
    }
    const double unit = draft_.at(c.sequences);  // (as measured: hopeful() is for choices)
    const double draft = options_.cost == DraftProposer::Cost::Once ? unit : unit * c.depth;
    catch_up_row_.record(1, std::max(1e-9, (c.seconds - draft) / double(c.rows)));
  }
  catch_up_pending_ = std::move(waiting);
}

double VerifyScheduler::catch_up_row_seconds() const {
  settle_catch_up();
  return catch_up_row_.at(1);
}

void VerifyScheduler::record_prompt_pass(int64_t rows, double seconds) {
  if (!frozen_ && rows > 0) prompt_row_.record(std::bit_width(uint64_t(rows)), seconds / double(rows));
}

double VerifyScheduler::prompt_row_seconds(int64_t rows) const {
  const int64_t size = std::bit_width(uint64_t(std::max<int64_t>(rows, 1)));
  double best = 0;
  int64_t distance = 0;
  for (const auto& [measured, seconds] : prompt_row_.points())
    if (best == 0 || std::abs(measured - size) < distance) {
      best = seconds;
      distance = std::abs(measured - size);
    }
  return best;
}

void VerifyScheduler::record_batch(int64_t sequences) {
  constexpr double kAlpha = 0.02;  // a memory of ~50 steps: a few requests' worth
  typical_batch_ = typical_batch_ > 0 ? (1 - kAlpha) * typical_batch_ + kAlpha * double(sequences) : double(sequences);
}

double VerifyScheduler::seconds_saved_per_token(int64_t batch) const {
  if (batch <= 0) return 0.0;
  const AcceptanceHistory fresh;  // a sequence without history: the process's rates
  std::vector<double> chance;
  double c = 1.0;
  for (int j = 0; j < options_.max_drafts; ++j) {
    c *= fresh.survival(size_t(j), &history_);
    chance.push_back(c);
  }
  const std::vector<std::vector<double>> cumulative(size_t(batch), chance);
  const std::vector<std::vector<double>> none(static_cast<size_t>(batch));
  const std::vector<int> n = best(cumulative, /*sunk_draft=*/false, 0, 0);
  int64_t drafting = 0;
  int deepest = 0;
  for (int k : n) {
    drafting += k > 0;
    deepest = std::max(deepest, k);
  }
  const double spec = expected_rate(cumulative, n, drafting, deepest);
  const double plain = expected_rate(none, std::vector<int>(size_t(batch), 0), 0, 0);
  return spec > 0 && plain > 0 ? std::max(0.0, 1.0 / plain - 1.0 / spec) : 0.0;
}

void VerifyScheduler::record_overhead(double seconds) {
  if (frozen_ || !(seconds >= 0)) return;
  constexpr double kAlpha = 0.25;
  overhead_ = overhead_ > 0 ? (1 - kAlpha) * overhead_ + kAlpha * seconds : seconds;
}

void VerifyScheduler::record_step(AcceptanceHistory& sequence, int drafted, int accepted,
                                  std::span<const float> survival) {
  sequence.record(drafted, accepted);
  history_.record(drafted, accepted);
  // (A probe's outcome goes into the histories at once: if it makes drafting pay, the next plan
  // drafts and the probe interval starts over; drafts accepted that still do not pay — a cheap
  // target, a dear drafter — leave the probes at their doubled interval.)
  // Each judged draft (those up to the first rejection): its predicted survival against its outcome.
  for (int j = 0; j < drafted && j <= accepted && size_t(j) < survival.size(); ++j) {
    if (predicted_.size() <= size_t(j)) {
      predicted_.resize(size_t(j) + 1, 0.0);
      observed_.resize(size_t(j) + 1, 0.0);
    }
    predicted_[size_t(j)] += double(survival[size_t(j)]);
    observed_[size_t(j)] += j < accepted ? 1.0 : 0.0;
  }
}

double VerifyScheduler::calibration(size_t j) const {
  constexpr double kWeight = 2.0;  // pseudo-drafts at factor 1: a few steps of evidence move it
  if (j >= predicted_.size()) return 1.0;
  return (observed_[j] + kWeight) / (predicted_[j] + kWeight);
}

double VerifyScheduler::draft_seconds(int64_t sequences, int depth) const {
  if (sequences <= 0 || depth <= 0) return 0.0;
  const double t = draft_.hopeful(sequences);
  return options_.cost == DraftProposer::Cost::Once ? t : t * depth;
}

double VerifyScheduler::expected_rate(std::span<const std::vector<double>> cumulative, std::span<const int> n,
                                      int64_t drafted_sequences, int depth) const {
  double tokens = 0;
  int64_t rows = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    tokens += 1.0;
    for (int j = 0; j < n[i]; ++j) tokens += cumulative[i][size_t(j)];
    rows += 1 + n[i];
  }
  const double seconds = step_seconds(rows, draft_seconds(drafted_sequences, depth));
  return seconds > 0 ? tokens / seconds : 0.0;
}

std::vector<int> VerifyScheduler::best(std::span<const std::vector<double>> cumulative, bool sunk_draft,
                                       int64_t drafted, int depth) const {
  // Every draft that could be verified, most likely to survive first (within a sequence the
  // cumulative survival falls, so the order keeps each sequence's drafts a prefix).
  struct Entry {
    double s;
    size_t seq;
    int j;
  };
  std::vector<Entry> entries;
  for (size_t i = 0; i < cumulative.size(); ++i)
    for (size_t j = 0; j < cumulative[i].size(); ++j) entries.push_back({cumulative[i][j], i, int(j)});
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.s > b.s || (a.s == b.s && a.j < b.j);
  });
  // The prefixes of that order: tokens and seconds of each.
  std::vector<int> n(cumulative.size(), 0);
  std::vector<std::vector<int>> prefixes;
  std::vector<double> tokens, seconds;
  auto add_prefix = [&] {
    int64_t drafting = 0, rows = 0;
    int deepest = 0;
    double t = 0;
    for (size_t i = 0; i < n.size(); ++i) {
      drafting += n[i] > 0;
      deepest = std::max(deepest, n[i]);
      rows += 1 + n[i];
      t += 1.0;
      for (int j = 0; j < n[i]; ++j) t += cumulative[i][size_t(j)];
    }
    // Planning: the draft costs only where some sequence drafts (to the deepest one's depth).
    const double draft = sunk_draft ? draft_seconds(drafted, depth) : draft_seconds(drafting, deepest);
    prefixes.push_back(n);
    tokens.push_back(t);
    seconds.push_back(step_seconds(rows, draft));
  };
  add_prefix();
  for (const Entry& e : entries) {
    if (n[e.seq] != e.j) continue;  // (equal survivals out of order: keep prefixes)
    ++n[e.seq];
    add_prefix();
  }
  size_t pick = 0;
  auto rate = [&](size_t k) { return seconds[k] > 0 ? tokens[k] / seconds[k] : 0.0; };
  for (size_t k = 1; k < prefixes.size(); ++k)
    if (rate(k) > rate(pick)) pick = k;
  if (sunk_draft) {
    // The draft is paid: a further draft is worth verifying when the tokens it adds beat what the
    // time of its rows earns at the long-run rate, the better of this step's best and plain
    // decoding (m sequences, m rows). Where drafting pays that is the same prefix; where it does
    // not (a probe), it verifies only the drafts likely enough to pay for their rows.
    const int64_t m = int64_t(cumulative.size());
    const double plain = pass_.at(m) > 0 ? double(m) / step_seconds(m, 0.0) : 0.0;
    const double lambda = std::max(rate(pick), plain);
    for (size_t k = 0; k < prefixes.size(); ++k)
      if (tokens[k] - lambda * seconds[k] > tokens[pick] - lambda * seconds[pick] + 1e-12) pick = k;
  }
  return prefixes[pick];
}

// A measuring step (the calibration, a probe) drafts for one sequence of the batch, in turn: one
// measures what is to be measured, and each drafting sequence first computes its drafter's queued
// rows (up to a window of them), which a batch of four paid for one step's worth of measurement.
std::vector<int> VerifyScheduler::one_of(std::vector<int> ask) {
  const size_t n = ask.size();
  size_t pick = n;
  for (size_t j = 0; j < n && pick == n; ++j)
    if (ask[(measured_turn_ + j) % n] > 0) pick = (measured_turn_ + j) % n;
  ++measured_turn_;
  for (size_t i = 0; i < n; ++i)
    if (i != pick) ask[i] = 0;
  return ask;
}

// Each sequence's cumulative survivals to the depth asked: by the mean, or by the optimistic bounds.
std::vector<std::vector<double>> VerifyScheduler::cumulative_survivals(std::span<const AcceptanceHistory* const> sequences,
                                                                       std::span<const int> ask, bool optimistic) const {
  std::vector<std::vector<double>> cumulative(sequences.size());
  for (size_t i = 0; i < sequences.size(); ++i) {
    double c = 1.0;
    for (int j = 0; j < ask[i]; ++j) {
      c *= optimistic ? sequences[i]->optimistic_survival(size_t(j), &history_)
                      : sequences[i]->survival(size_t(j), &history_);
      cumulative[i].push_back(c);
    }
  }
  return cumulative;
}

// Would drafting pay at the optimistic end of each sequence's acceptance (optimistic_survival)?
// Sets n to the depth that would then pay best: where the first position is well measured and
// only a deeper one is in doubt, one draft would measure nothing (auto verified one draft for 130
// steps of a 256-token run, where one lost a little and two paid 1.13x, the second position never
// tried after one early failure).
bool VerifyScheduler::uncertain(std::span<const AcceptanceHistory* const> sequences, std::span<const int> ask,
                                std::vector<int>& n) const {
  n = best(cumulative_survivals(sequences, ask, /*optimistic=*/true), /*sunk_draft=*/false, 0, 0);
  return std::any_of(n.begin(), n.end(), [](int k) { return k > 0; });
}

// Has plain decoding since the last draft run long enough that a probe now costs at most
// kProbeShare of its time? A probe drafts once for one sequence of the batch: its drafts
// (kMeasuringDrafts), as many rows more in the pass, and the drafter's rows queued since that sequence's last draft (up to a window; the
// longest streak's worth, an overestimate where the sequences probe in turn), at their measured
// costs (a cost not yet measured counts as nothing).
bool VerifyScheduler::probe_affordable(int64_t batch) const {
  const double plain_step = pass_.at(batch) + overhead_;
  if (!(plain_step > 0)) return true;
  const int64_t queued = options_.window > 0 ? std::min(since_draft_, options_.window) : 0;
  const int depth = kMeasuringDrafts;
  const double unit = draft_.at(1);
  const double probe = (options_.cost == DraftProposer::Cost::Once ? unit : unit * depth) +
                       std::max(0.0, pass_.at(batch + depth) - pass_.at(batch)) +
                       double(queued) * catch_up_row_seconds();
  return probe <= kProbeShare * double(since_draft_) * plain_step;
}

// Would drafting pay if every draft were accepted? Where it would not (a batch whose verification
// rows cost about a token's time each, a drafter as dear as a pass), measuring acceptance cannot
// change the decision, and a probe is pure cost: its first draft also computes the drafter's rows
// queued during the plain streak (up to a window of them per sequence).
bool VerifyScheduler::could_pay(std::span<const int> ask) const {
  std::vector<std::vector<double>> certain(ask.size());
  for (size_t i = 0; i < ask.size(); ++i) certain[i].assign(size_t(ask[i]), 1.0);
  const std::vector<int> n = best(certain, /*sunk_draft=*/false, 0, 0);
  return std::any_of(n.begin(), n.end(), [](int k) { return k > 0; });
}

std::vector<int> VerifyScheduler::plan(std::span<const AcceptanceHistory* const> sequences,
                                       std::span<const int> limits) {
  DSV4_CHECK(sequences.size() == limits.size(), "verify scheduler: ", sequences.size(), " sequences, ",
             limits.size(), " limits");
  ++steps_;
  probing_ = false;
  explore_.assign(sequences.size(), 0);
  std::vector<int> ask(limits.begin(), limits.end());
  for (int& k : ask) k = std::clamp(k, 0, options_.max_drafts);
  if (calibrating()) {  // a verification of kMeasuringDrafts once, then plain passes, until two sizes are known
    if (steps_ <= kWarmUpSteps) {
      ++plain_steps_;
      return std::vector<int>(ask.size(), 0);
    }
    if (!calibrated_deep_) {
      calibrated_deep_ = true;
      if (options_.cost == DraftProposer::Cost::PerDraft)
        for (int& k : ask) k = std::min(k, kMeasuringDrafts);
      return one_of(ask);
    }
    ++plain_steps_;
    return std::vector<int>(ask.size(), 0);
  }
  std::vector<int> n = best(cumulative_survivals(sequences, ask, /*optimistic=*/false), /*sunk_draft=*/false, 0, 0);
  bool drafts = std::any_of(n.begin(), n.end(), [](int k) { return k > 0; });
  if (!drafts && uncertain(sequences, ask, n)) {
    // Plain by the mean, drafting by what the sequence's few trials still allow: the drafts that
    // bound pays for are verified (the positions in doubt), a measurement while the evidence is
    // thin (a few early rejections of a drafter whose acceptance is above break-even decoded
    // plainly for dozens of steps on the 8-layer mirror). As trials accumulate the bound closes in
    // on the mean and the step is plain.
    probing_ = drafts = true;
    explore_ = n;  // (select() verifies that deep: the measurement is the point)
    ++uncertain_steps_;
  }
  if (!drafts && !could_pay(ask)) {  // nothing a probe could find would change the decision
    ++plain_steps_;
    return n;
  }
  if (!drafts && (++since_draft_ < probe_interval_ || !probe_affordable(int64_t(ask.size())))) {
    ++plain_steps_;
    return n;
  }
  since_draft_ = 0;
  if (!drafts) {
    probing_ = true;
    // A probe: acceptance is measured only where drafts are verified. While drafting keeps not
    // paying, probes come at doubling intervals, up to 64x probe_every: a probe also computes the
    // drafter's rows queued since its last draft (up to a window), so probes a window apart or
    // less cost the drafter a row per step (an MTP row is several percent of a decode step on
    // V4-Flash dimensions), and 512 steps apart a window per 512 steps. A probe verifies
    // kMeasuringDrafts drafts, as the calibration did: their acceptance and their pass are what
    // the choice most needs re-measured (on mirror-v4-flash, where one draft loses and two pay,
    // one-draft probes after a dear first 3-row pass found draft 1 accepted every time and never
    // drafted again). A chain drafts that deep; a block drafter drafts its block.
    probe_interval_ = std::min(probe_interval_ * 2, int64_t(options_.probe_every) * kMaxProbeFactor);
    if (options_.cost == DraftProposer::Cost::PerDraft)
      for (int& k : ask) k = std::min(k, kMeasuringDrafts);
    ask = one_of(ask);
    for (size_t i = 0; i < ask.size(); ++i) explore_[i] = std::min(ask[i], kMeasuringDrafts);
    return ask;
  }
  probe_interval_ = options_.probe_every;
  if (!probing_) deeper(sequences, ask, n);
  // A block drafter drafts its whole block for the same cost (select() trims it with the drafts'
  // own survivals); a chain drafts as deep as the plan.
  if (options_.cost == DraftProposer::Cost::Once)
    for (size_t i = 0; i < ask.size(); ++i) ask[i] = n[i] > 0 ? ask[i] : 0;
  else
    ask = n;
  return ask;
}

void VerifyScheduler::deeper(std::span<const AcceptanceHistory* const> sequences, std::span<const int> ask,
                             std::vector<int>& n) {
  const std::vector<int> m = best(cumulative_survivals(sequences, ask, /*optimistic=*/true), /*sunk_draft=*/false, 0, 0);
  std::vector<std::vector<double>> mean;  // (only where a position is rarely tried)
  bool any = false;
  for (size_t i = 0; i < n.size(); ++i) {
    if (n[i] <= 0 || n[i] >= ask[i]) continue;
    bool retry = m[i] <= n[i] && rarely_tried(*sequences[i], size_t(n[i]));
    if (retry && mean.empty()) mean = cumulative_survivals(sequences, ask, /*optimistic=*/false);
    if (m[i] > n[i] || (retry && would_pay_if_accepted(mean, n, i))) {
      explore_[i] = ++n[i];
      any = true;
    }
  }
  uncertain_steps_ += any;
}

// The position after `j` verified ones has been tried no more than log2 of the times position j
// was: a few early rejections there close its optimistic bound (two in a row on mirror-v4-flash's
// first steps, where position 2 passes 85% of the time later on: auto verified one draft to the
// end, level with plain decoding, where two paid 1.1x), and only further trials can reopen it.
// Trials at a logarithmic pace cost little where it never pays (7 in 128 steps).
bool VerifyScheduler::rarely_tried(const AcceptanceHistory& h, size_t j) {
  const int64_t tried = j < h.trials.size() ? h.trials[j] : 0, before = j <= h.trials.size() ? h.trials[j - 1] : 0;
  return before > 0 && tried <= std::bit_width(uint64_t(before)) - 1;
}

// Would verifying one draft more for sequence i (n[i] + 1) pay if that draft were certain to pass?
bool VerifyScheduler::would_pay_if_accepted(const std::vector<std::vector<double>>& mean, const std::vector<int>& n,
                                            size_t i) const {
  std::vector<std::vector<double>> c(mean.size());
  for (size_t k = 0; k < mean.size(); ++k) c[k].assign(mean[k].begin(), mean[k].begin() + n[k]);
  c[i].push_back(c[i].back());
  return best(c, /*sunk_draft=*/false, 0, 0)[i] > n[i];
}

std::vector<int> VerifyScheduler::select(std::span<const AcceptanceHistory* const> sequences,
                                         std::span<const Draft* const> drafts) {
  DSV4_CHECK(sequences.size() == drafts.size(), "verify scheduler: ", sequences.size(), " sequences, ",
             drafts.size(), " drafts");
  std::vector<int> all(drafts.size());
  int64_t drafted = 0;
  int depth = 0;
  for (size_t i = 0; i < drafts.size(); ++i) {
    all[i] = int(drafts[i]->tokens.size());
    drafted += all[i] > 0;
    depth = std::max(depth, all[i]);
  }
  if (calibrating()) {
    for (int& k : all) k = std::min(k, kMeasuringDrafts);
    return all;
  }
  std::vector<std::vector<double>> cumulative(drafts.size());
  for (size_t i = 0; i < drafts.size(); ++i) {
    const Draft& d = *drafts[i];
    double c = 1.0;
    for (int j = 0; j < all[i]; ++j) {
      c *= size_t(j) < d.survival.size() ? std::min(1.0, double(d.survival[size_t(j)]) * calibration(size_t(j)))
                                         : sequences[i]->survival(size_t(j), &history_);
      cumulative[i].push_back(c);
    }
  }
  std::vector<int> chosen = best(cumulative, /*sunk_draft=*/true, drafted, depth);
  // A probe is there to measure: its first draft is verified whatever the model expects of it
  // (trimmed, as the sunk-draft rule trims an unlikely draft, a probe measured nothing, and
  // acceptance that had risen since drafting stopped paying was never seen).
  if (probing_)
    for (size_t i = 0; i < chosen.size(); ++i) chosen[i] = std::max(chosen[i], std::min(all[i], 1));
  // So is a draft one position deeper than the mean says pays (plan(): deeper()).
  if (explore_.size() == chosen.size())
    for (size_t i = 0; i < chosen.size(); ++i)
      chosen[i] = std::max(chosen[i], std::min(all[i], explore_[i]));
  // What the model expects of the choice, to set beside what verification finds (the report).
  for (size_t i = 0; i < chosen.size(); ++i) {
    if (chosen[i] == 0) continue;
    ++expected_.steps;
    for (int j = 0; j < chosen[i]; ++j) expected_.accepted += cumulative[i][size_t(j)];
  }
  std::vector<std::vector<double>> none(cumulative.size());
  const std::vector<int> zero(cumulative.size(), 0);
  expected_.seconds += 1.0 / std::max(expected_rate(cumulative, chosen, drafted, depth), 1e-12);
  expected_.plain_seconds += 1.0 / std::max(expected_rate(none, zero, 0, 0), 1e-12);
  return chosen;
}

}  // namespace dsv4

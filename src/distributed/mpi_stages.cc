#include "distributed/mpi_stages.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#ifdef DSV4_HAVE_MPI
#include <mpi.h>
#endif

#include "core/error.h"
#include "model/transformer.h"

namespace dsv4 {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

uint64_t hash_file(uint64_t h, const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return fnv1a(h, bytes.data(), bytes.size());
}

#ifdef DSV4_HAVE_MPI
constexpr int kHeaderTag = 1, kStreamsTag = 2, kTapsTag = 3;

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, text, &n);
  throw Error(cat("MPI ", what, ": ", std::string(text, size_t(n))));
}

template <class T>
std::vector<T> receive_sized(int source, int tag, MPI_Datatype type) {
  MPI_Status status;
  check(MPI_Probe(source, tag, MPI_COMM_WORLD, &status), "probe");
  int count = 0;
  check(MPI_Get_count(&status, type, &count), "message size");
  std::vector<T> v(static_cast<size_t>(count));
  check(MPI_Recv(v.data(), count, type, source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "receive");
  return v;
}
#endif

}  // namespace

// ---- the session

bool MpiSession::available() {
#ifdef DSV4_HAVE_MPI
  return true;
#else
  return false;
#endif
}

bool MpiSession::launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

MpiSession::MpiSession(int* argc, char*** argv) {
#ifdef DSV4_HAVE_MPI
  int provided = 0;
  check(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "init");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    throw Error(cat("MPI: this MPI library cannot serve calls from the server's scheduler thread (thread level ",
                    provided, ", needs MPI_THREAD_SERIALIZED)"));
  }
#else
  (void)argc;
  (void)argv;
  throw Error("this dsv4 was built without MPI: install Open MPI (Debian: openmpi-bin libopenmpi-dev) and rebuild "
              "to run in pipeline stages");
#endif
}

MpiSession::~MpiSession() {
#ifdef DSV4_HAVE_MPI
  MPI_Finalize();
#endif
}

std::string MpiSession::host() const {
#ifdef DSV4_HAVE_MPI
  char name[MPI_MAX_PROCESSOR_NAME];
  int n = 0;
  MPI_Get_processor_name(name, &n);
  return std::string(name, size_t(n));
#else
  return "localhost";
#endif
}

void MpiSession::abort(int code) const {
#ifdef DSV4_HAVE_MPI
  MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::_Exit(code);
}

// ---- the plan

uint64_t checkpoint_fingerprint(const std::filesystem::path& dir) {
  DSV4_CHECK(std::filesystem::is_regular_file(dir / "config.json"), dir.string(), ": no checkpoint there (no ",
             "config.json); every machine needs the checkpoint at the path --model names");
  uint64_t h = 14695981039346656037ull;
  h = hash_file(h, dir / "config.json");
  if (std::filesystem::exists(dir / "model.safetensors.index.json")) h = hash_file(h, dir / "model.safetensors.index.json");
  std::vector<std::pair<std::string, uint64_t>> shards;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") shards.emplace_back(e.path().filename().string(), e.file_size());
  std::sort(shards.begin(), shards.end());
  // Each shard's name, size, header and 4 KB at 64 places through it: the same layout with other
  // weights (another seed, another fine-tune) differs there, and no rank reads a whole checkpoint.
  std::vector<char> sample(4096);
  for (const auto& [name, size] : shards) {
    h = fnv1a(h, name.data(), name.size());
    h = fnv1a(h, &size, sizeof size);
    std::ifstream in(dir / name, std::ios::binary);
    uint64_t header = 0;
    in.read(reinterpret_cast<char*>(&header), sizeof header);
    std::vector<char> text(size_t(std::min<uint64_t>(header, size)));
    in.read(text.data(), std::streamsize(text.size()));
    h = fnv1a(h, text.data(), text.size());
    for (uint64_t i = 0; i < 64 && size > sample.size(); ++i) {
      in.clear();
      in.seekg(std::streamoff((size - sample.size()) / 63 * i));
      in.read(sample.data(), std::streamsize(sample.size()));
      h = fnv1a(h, sample.data(), size_t(in.gcount()));
    }
  }
  return h;
}

// ---- the link

struct MpiStageLink::Pending {
  StageMessage m;
#ifdef DSV4_HAVE_MPI
  MPI_Request requests[3];
#endif
};

MpiStageLink::MpiStageLink(MpiSession& session, const std::filesystem::path& model,
                           const std::function<StagePlan()>& make_plan)
    : session_(session) {
#ifdef DSV4_HAVE_MPI
  const int n = session.size(), rank = session.rank();
  // This rank's part (rank 0: the plan too), its failure kept to be told to all.
  StagePlan plan;
  uint64_t mine = 0;
  std::string failure;
  try {
    if (rank == 0) plan = make_plan();
    mine = checkpoint_fingerprint(model);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  constexpr int kText = 512;
  auto gather = [&](std::string text) {
    text.resize(kText - 1, '\0');
    std::vector<char> all(size_t(n) * kText);
    check(MPI_Allgather(text.c_str(), kText, MPI_CHAR, all.data(), kText, MPI_CHAR, MPI_COMM_WORLD), "allgather");
    std::vector<std::string> texts;
    for (int r = 0; r < n; ++r) texts.emplace_back(all.data() + size_t(r) * kText);
    return texts;
  };
  const std::vector<std::string> where = gather(cat(model.string(), " on ", session.host()));
  const std::vector<std::string> failures = gather(failure);
  std::string failed;
  for (int r = 0; r < n; ++r)
    if (!failures[size_t(r)].empty())
      failed += cat(failed.empty() ? "" : "; ", n > 1 && r > 0 ? cat("rank ", r, " (", where[size_t(r)], "): ") : "",
                    failures[size_t(r)]);
  if (!failed.empty()) throw Error(failed);
  // Every rank's checkpoint, compared with rank 0's.
  std::vector<uint64_t> prints(static_cast<size_t>(n));
  check(MPI_Allgather(&mine, 1, MPI_UINT64_T, prints.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD), "allgather");
  for (int r = 1; r < n; ++r)
    DSV4_CHECK(prints[size_t(r)] == prints[0], "pipeline stages: rank ", r, " opened ", where[size_t(r)],
               ", which is not the checkpoint rank 0 opened (", where[0], "): their config.json, index, shard "
               "headers or sampled weights differ; every rank must open the same checkpoint");
  // Rank 0's plan to all.
  std::vector<int64_t> words;
  if (rank == 0) {
    DSV4_CHECK(int(plan.first_layers.size()) == n + 1, "pipeline stages: a plan of ", plan.first_layers.size() - 1,
               " stages for ", n, " ranks");
    words = plan.first_layers;
    words.push_back(plan.max_rollback);
    words.push_back(plan.drafter ? 1 : 0);
  }
  int64_t count = int64_t(words.size());
  check(MPI_Bcast(&count, 1, MPI_INT64_T, 0, MPI_COMM_WORLD), "broadcast");
  words.resize(size_t(count));
  check(MPI_Bcast(words.data(), int(count), MPI_INT64_T, 0, MPI_COMM_WORLD), "broadcast");
  DSV4_CHECK(count == n + 3, "pipeline stages: rank 0 planned ", count - 3, " stages for ", n, " ranks");
  plan.first_layers.assign(words.begin(), words.begin() + n + 1);
  plan.max_rollback = words[size_t(n + 1)];
  plan.drafter = words[size_t(n + 2)] != 0;
  plan_ = plan;
#else
  (void)model;
  (void)make_plan;
  throw Error("pipeline stages: this dsv4 was built without MPI");
#endif
}

MpiStageLink::~MpiStageLink() {
  try {
    complete_sends(true);
  } catch (...) {
  }
}

void MpiStageLink::complete_sends(bool wait_all) {
#ifdef DSV4_HAVE_MPI
  while (!pending_.empty()) {
    Pending& p = *pending_.front();
    int done = 0;
    if (wait_all) {
      check(MPI_Waitall(3, p.requests, MPI_STATUSES_IGNORE), "send");
      done = 1;
    } else {
      check(MPI_Testall(3, p.requests, &done, MPI_STATUSES_IGNORE), "send");
    }
    if (!done) return;
    pending_.pop_front();
  }
#else
  (void)wait_all;
#endif
}

void MpiStageLink::send_next(StageMessage&& m) {
#ifdef DSV4_HAVE_MPI
  const auto t0 = std::chrono::steady_clock::now();
  const int to = (stage() + 1) % stages();
  auto p = std::make_unique<Pending>();
  p->m = std::move(m);
  check(MPI_Isend(p->m.header.data(), int(p->m.header.size()), MPI_INT64_T, to, kHeaderTag, MPI_COMM_WORLD,
                  &p->requests[0]), "send");
  check(MPI_Isend(p->m.streams.data(), int(p->m.streams.size()), MPI_FLOAT, to, kStreamsTag, MPI_COMM_WORLD,
                  &p->requests[1]), "send");
  check(MPI_Isend(p->m.taps.data(), int(p->m.taps.size()), MPI_FLOAT, to, kTapsTag, MPI_COMM_WORLD,
                  &p->requests[2]), "send");
  stats_.bytes_sent += int64_t(p->m.header.size() * 8 + (p->m.streams.size() + p->m.taps.size()) * 4);
  ++stats_.messages_sent;
  pending_.push_back(std::move(p));
  complete_sends(false);
  stats_.send_seconds += seconds_since(t0);
#else
  (void)m;
#endif
}

StageMessage MpiStageLink::receive_previous() {
  StageMessage m;
#ifdef DSV4_HAVE_MPI
  const auto t0 = std::chrono::steady_clock::now();
  const int from = (stage() + stages() - 1) % stages();
  // Poll, then sleep a little longer each time (20 µs .. 0.5 ms): a blocking receive spins on a
  // core, which ranks sharing a machine's cores take from each other.
  auto nap = std::chrono::microseconds(20);
  for (;;) {
    int ready = 0;
    check(MPI_Iprobe(from, kHeaderTag, MPI_COMM_WORLD, &ready, MPI_STATUS_IGNORE), "probe");
    if (ready) break;
    complete_sends(false);  // (and the progress of this rank's own sends)
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(500));
  }
  m.header = receive_sized<int64_t>(from, kHeaderTag, MPI_INT64_T);
  m.streams = receive_sized<float>(from, kStreamsTag, MPI_FLOAT);
  m.taps = receive_sized<float>(from, kTapsTag, MPI_FLOAT);
  stats_.wait_seconds += seconds_since(t0);
#endif
  return m;
}

// ---- the stages' loops

void serve_stage(Transformer& model, MpiStageLink& link) {
  CacheMirror mirror([&model] { return model.new_sequence(); });
  StageStats& stats = link.stats();
  for (;;) {
    StageMessage m = link.receive_previous();
    StageHeader h = decode_stage_header(m.header);
    if (h.kind == StageHeader::Stop) {
      stats.append_to(h.stats);
      m.header = encode_stage_header(h);
      link.send_next(std::move(m));
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    mirror.apply(h.ops);
    for (const StageRequest& r : h.requests) stats.rows += int64_t(r.tokens.size());
    model.forward_stage(m, h, mirror);
    ++stats.passes;
    stats.compute_seconds += seconds_since(t0);
    link.send_next(std::move(m));
  }
}

std::vector<StageStats> stop_stages(StageLink& link) {
  StageHeader h;
  h.kind = StageHeader::Stop;
  link.stats().append_to(h.stats);
  StageMessage m;
  m.header = encode_stage_header(h);
  link.send_next(std::move(m));
  const StageHeader back = decode_stage_header(link.receive_previous().header);
  DSV4_CHECK(back.kind == StageHeader::Stop && back.stats.size() == StageStats::kWords * size_t(link.stages()),
             "pipeline stages: the stop came back without every stage's statistics");
  std::vector<StageStats> out;
  for (int s = 0; s < link.stages(); ++s)
    out.push_back(StageStats::read(std::span(back.stats).subspan(size_t(s) * StageStats::kWords, StageStats::kWords)));
  return out;
}

}  // namespace dsv4

#include "checkpoint/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <set>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dsv4 {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr uint64_t kAlign = 64;

uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }
}  // namespace

int64_t TensorDecl::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

uint64_t TensorDecl::nbytes() const { return uint64_t(numel()) * dtype_size(dtype); }

SafetensorsWriter::SafetensorsWriter(const fs::path& path, std::vector<TensorDecl> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), partial_path_(path.string() + ".partial"), tensors_(std::move(tensors)) {
  const std::string file = path_.string();
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;

  // Validate the declarations and place the tensors: 64-byte multiples first.
  std::set<std::string> names;
  std::vector<uint64_t> sizes(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TensorDecl& t = tensors_[i];
    DSV4_CHECK(!t.name.empty() && t.name != "__metadata__", file, ": invalid tensor name '", t.name, "'");
    DSV4_CHECK(names.insert(t.name).second, file, ": tensor '", t.name, "' declared twice");
    uint64_t n = dtype_size(t.dtype);
    for (int64_t d : t.shape) {
      DSV4_CHECK(d >= 0, file, ": tensor '", t.name, "' has a negative dimension ", d);
      DSV4_CHECK(!__builtin_mul_overflow(n, uint64_t(d), &n), file, ": tensor '", t.name,
                 "' is too large");
    }
    sizes[i] = n;
  }
  offsets_.assign(tensors_.size(), 0);
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < tensors_.size(); ++i)
      if ((sizes[i] % kAlign == 0) == (pass == 0)) {
        offsets_[i] = data_bytes_;
        data_bytes_ += sizes[i];
      }
  for (size_t i = 0; i < tensors_.size(); ++i)
    header[tensors_[i].name] = {{"dtype", std::string(dtype_name(tensors_[i].dtype))},
                                {"shape", tensors_[i].shape},
                                {"data_offsets", {offsets_[i], offsets_[i] + sizes[i]}}};

  std::string text = header.dump();
  text.resize(size_t(round_up(8 + text.size(), kAlign) - 8), ' ');
  data_start_ = 8 + text.size();

  fd_ = ::open(partial_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  DSV4_CHECK(fd_ >= 0, partial_path_.string(), ": cannot create: ", std::strerror(errno));
  uint64_t header_len = text.size();
  std::string prefix(8, '\0');
  std::memcpy(prefix.data(), &header_len, 8);  // little-endian u64 (x86-64)
  current_ = -1;
  const std::string head = prefix + text;
  size_t done = 0;
  while (done < head.size()) {
    ssize_t n = ::pwrite(fd_, head.data() + done, head.size() - done, off_t(done));
    if (n < 0 && errno == EINTR) continue;
    DSV4_CHECK(n > 0, partial_path_.string(), ": write failed: ", std::strerror(errno));
    done += size_t(n);
  }
}

SafetensorsWriter::~SafetensorsWriter() {
  if (finished_) return;
  close_file();
  std::error_code ec;
  fs::remove(partial_path_, ec);
}

void SafetensorsWriter::close_file() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void SafetensorsWriter::check_current_complete() const {
  if (current_ < 0) return;
  const TensorDecl& t = tensors_[size_t(current_)];
  DSV4_CHECK(written_ == t.nbytes(), path_.string(), ": tensor '", t.name, "' received ", written_,
             " of its ", t.nbytes(), " bytes");
}

void SafetensorsWriter::begin_tensor(const std::string& name) {
  DSV4_CHECK(!finished_, path_.string(), ": begin_tensor('", name, "') after finish()");
  check_current_complete();
  DSV4_CHECK(size_t(current_ + 1) < tensors_.size(), path_.string(), ": tensor '", name,
             "' was not declared (all ", tensors_.size(), " declared tensors are written)");
  const TensorDecl& next = tensors_[size_t(current_ + 1)];
  DSV4_CHECK(next.name == name, path_.string(), ": tensor '", name, "' written out of order; expected '",
             next.name, "'");
  ++current_;
  written_ = 0;
}

void SafetensorsWriter::write(const void* data, size_t nbytes) {
  DSV4_CHECK(current_ >= 0 && !finished_, path_.string(), ": write() without begin_tensor()");
  const TensorDecl& t = tensors_[size_t(current_)];
  DSV4_CHECK(written_ + nbytes <= t.nbytes(), path_.string(), ": tensor '", t.name, "' holds ",
             t.nbytes(), " bytes; received ", written_ + nbytes);
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t pos = data_start_ + offsets_[size_t(current_)] + written_;
  size_t left = nbytes;
  while (left > 0) {
    ssize_t n = ::pwrite(fd_, p, left, off_t(pos));
    if (n < 0 && errno == EINTR) continue;
    DSV4_CHECK(n > 0, partial_path_.string(), ": write of tensor '", t.name, "' failed: ",
               std::strerror(errno));
    p += n;
    pos += uint64_t(n);
    left -= size_t(n);
  }
  written_ += nbytes;
}

void SafetensorsWriter::write_tensor(const std::string& name, const void* data, size_t nbytes) {
  begin_tensor(name);
  write(data, nbytes);
}

void SafetensorsWriter::finish() {
  if (finished_) return;
  check_current_complete();
  DSV4_CHECK(size_t(current_ + 1) == tensors_.size(), path_.string(), ": tensor '",
             tensors_[size_t(current_ + 1)].name, "' was never written");
  DSV4_CHECK(::ftruncate(fd_, off_t(file_bytes())) == 0, partial_path_.string(),
             ": cannot set the file size: ", std::strerror(errno));
  DSV4_CHECK(::close(fd_) == 0, partial_path_.string(), ": close failed: ", std::strerror(errno));
  fd_ = -1;
  std::error_code ec;
  fs::rename(partial_path_, path_, ec);
  DSV4_CHECK(!ec, partial_path_.string(), ": cannot rename to ", path_.string(), ": ", ec.message());
  finished_ = true;
}

// ---- Sharded checkpoints -----------------------------------------------------------

std::string shard_file_name(int index, int count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", index + 1, count);
  return buf;
}

std::vector<std::vector<TensorDecl>> plan_shards(const std::vector<TensorDecl>& tensors,
                                                 uint64_t max_shard_bytes, int min_shards) {
  uint64_t total = 0;
  for (auto& t : tensors) total += t.nbytes();
  uint64_t target = std::max<uint64_t>(1, max_shard_bytes);
  if (min_shards > 1) target = std::min(target, std::max<uint64_t>(1, round_up(total, uint64_t(min_shards)) / uint64_t(min_shards)));

  std::vector<std::vector<TensorDecl>> shards(1);
  uint64_t current = 0;
  for (auto& t : tensors) {
    if (!shards.back().empty() && current + t.nbytes() > target) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(t);
    current += t.nbytes();
  }
  // Greedy filling can leave fewer shards than asked when sizes are uneven: split the
  // largest shard that has more than one tensor, at its byte midpoint.
  auto bytes = [](const std::vector<TensorDecl>& s) {
    uint64_t b = 0;
    for (auto& t : s) b += t.nbytes();
    return b;
  };
  while (int(shards.size()) < min_shards) {
    long best = -1;
    for (size_t i = 0; i < shards.size(); ++i)
      if (shards[i].size() > 1 && (best < 0 || bytes(shards[i]) > bytes(shards[size_t(best)]))) best = long(i);
    if (best < 0) break;
    auto& s = shards[size_t(best)];
    const uint64_t half = bytes(s) / 2;
    size_t cut = 1;
    for (uint64_t acc = s[0].nbytes(); cut + 1 < s.size() && acc + s[cut].nbytes() <= half; ++cut)
      acc += s[cut].nbytes();
    std::vector<TensorDecl> tail(s.begin() + long(cut), s.end());
    s.resize(cut);
    shards.insert(shards.begin() + best + 1, std::move(tail));
  }
  return shards;
}

ShardedWriter::ShardedWriter(const fs::path& dir, std::vector<std::vector<TensorDecl>> plan)
    : dir_(dir), plan_(std::move(plan)) {
  DSV4_CHECK(!plan_.empty(), dir_.string(), ": a checkpoint needs at least one shard");
  open_shard(0);
}

void ShardedWriter::open_shard(size_t index) {
  if (writer_) {
    writer_->finish();
    total_bytes_ += writer_->file_bytes();
  }
  shard_ = index;
  next_in_shard_ = 0;
  writer_ = std::make_unique<SafetensorsWriter>(
      dir_ / shard_file_name(int(index), int(plan_.size())), plan_[index],
      std::map<std::string, std::string>{{"format", "pt"}});
}

void ShardedWriter::begin_tensor(const std::string& name) {
  while (next_in_shard_ == plan_[shard_].size()) {
    DSV4_CHECK(shard_ + 1 < plan_.size(), dir_.string(), ": tensor '", name,
               "' was not declared (all shards are written)");
    open_shard(shard_ + 1);
  }
  writer_->begin_tensor(name);
  ++next_in_shard_;
}

void ShardedWriter::write(const void* data, size_t nbytes) { writer_->write(data, nbytes); }

void ShardedWriter::write_tensor(const std::string& name, const void* data, size_t nbytes) {
  begin_tensor(name);
  write(data, nbytes);
}

void ShardedWriter::finish() {
  while (shard_ + 1 < plan_.size()) {
    DSV4_CHECK(next_in_shard_ == plan_[shard_].size(), dir_.string(), ": tensor '",
               plan_[shard_][next_in_shard_].name, "' was never written");
    open_shard(shard_ + 1);
  }
  writer_->finish();
  total_bytes_ += writer_->file_bytes();
  writer_.reset();

  json index;
  uint64_t data_bytes = 0;
  json weight_map = json::object();
  for (size_t s = 0; s < plan_.size(); ++s)
    for (auto& t : plan_[s]) {
      weight_map[t.name] = shard_file_name(int(s), int(plan_.size()));
      data_bytes += t.nbytes();
    }
  index["metadata"] = {{"total_size", data_bytes}};
  index["weight_map"] = std::move(weight_map);
  const fs::path index_path = dir_ / "model.safetensors.index.json";
  std::ofstream out(index_path);
  out << index.dump(2) << "\n";
  out.close();
  DSV4_CHECK(out.good(), index_path.string(), ": cannot write");
  total_bytes_ += fs::file_size(index_path);
}

}  // namespace dsv4

#include "text/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>

#include "core/error.h"

namespace slapo::text {

namespace {
constexpr char kMagic[8] = {'S', 'L', 'A', 'P', 'O', 'T', 'K', '1'};
constexpr size_t kHeaderBytes = 32;

struct Header {
  char magic[8];
  uint64_t tokens, documents;
  uint32_t vocab_size, reserved;
};
static_assert(sizeof(Header) == kHeaderBytes, "the header is 32 bytes");
}  // namespace

struct TokenFileWriter::Out {
  std::FILE* file = nullptr;
  ~Out() {
    if (file) std::fclose(file);
  }
};

TokenFileWriter::TokenFileWriter(const std::string& path, uint32_t vocab_size)
    : path_(path), partial_(path + ".partial"), vocab_size_(vocab_size), out_(std::make_unique<Out>()) {
  auto parent = std::filesystem::path(path).parent_path();
  std::error_code ignored;  // fopen below says what is wrong
  if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
  out_->file = std::fopen(partial_.c_str(), "wb");
  if (!out_->file) throw Error(fmt::format("tokenize: cannot write {}: {}", partial_, std::strerror(errno)));
  Header blank{};
  std::fwrite(&blank, sizeof blank, 1, out_->file);  // the counts are known at finish
}

TokenFileWriter::~TokenFileWriter() {
  if (out_->file) {  // not finished: nothing is left behind
    std::fclose(out_->file);
    out_->file = nullptr;
    std::remove(partial_.c_str());
  }
}

void TokenFileWriter::add(const std::vector<int64_t>& ids, const std::string& where) {
  std::vector<uint32_t> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<uint64_t>(ids[i]) >= vocab_size_)
      throw Error(fmt::format("tokenize: {}: token id {} is past the vocabulary (0 .. {})", where, ids[i],
                              vocab_size_ - 1));
    out[i] = static_cast<uint32_t>(ids[i]);
  }
  if (!out.empty() && std::fwrite(out.data(), sizeof(uint32_t), out.size(), out_->file) != out.size())
    throw Error(fmt::format("tokenize: writing {} failed: {}", partial_, std::strerror(errno)));
  offsets_.push_back(offsets_.back() + out.size());
}

void TokenFileWriter::finish() {
  auto fail = [&] { return Error(fmt::format("tokenize: writing {} failed: {}", partial_, std::strerror(errno))); };
  if (std::fwrite(offsets_.data(), sizeof(uint64_t), offsets_.size(), out_->file) != offsets_.size()) throw fail();
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.tokens = tokens(), header.documents = documents(), header.vocab_size = vocab_size_;
  if (std::fseek(out_->file, 0, SEEK_SET) != 0 || std::fwrite(&header, sizeof header, 1, out_->file) != 1) throw fail();
  if (std::fflush(out_->file) != 0 || ::fsync(fileno(out_->file)) != 0) throw fail();
  std::fclose(out_->file);
  out_->file = nullptr;
  std::filesystem::rename(partial_, path_);
}

std::shared_ptr<TokenFile> TokenFile::open(const std::string& path) {
  std::shared_ptr<TokenFile> f(new TokenFile());
  f->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error(fmt::format("token_file: cannot open {}: {}", path, std::strerror(errno)));
  struct stat st {};
  ::fstat(fd, &st);
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ < kHeaderBytes) {
    ::close(fd);
    throw Error(fmt::format("token_file: {} is {} bytes, shorter than a token file's 32-byte header (write one with "
                            "slapo-lua tokenize)", path, f->size_));
  }
  f->map_ = ::mmap(nullptr, f->size_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (f->map_ == MAP_FAILED) {
    f->map_ = nullptr;
    throw Error(fmt::format("token_file: cannot map {}: {}", path, std::strerror(errno)));
  }
  Header header;
  std::memcpy(&header, f->map_, sizeof header);
  if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0)
    throw Error(fmt::format("token_file: {} is not a token file (no SLAPOTK1 header; write one with slapo-lua tokenize)",
                            path));
  const uint64_t expected = kHeaderBytes + 4 * header.tokens + 8 * (header.documents + 1);
  if (header.tokens > f->size_ || header.documents > f->size_ || expected != f->size_) {
    const uint64_t ids_end = kHeaderBytes + 4 * header.tokens;
    std::string where = f->size_ > expected ? fmt::format("{} bytes more than that", f->size_ - expected)
                        : f->size_ < ids_end
                            ? fmt::format("it ends at byte {}, inside token {}", f->size_, (f->size_ - kHeaderBytes) / 4)
                            : fmt::format("it ends at byte {}, inside document offset {}", f->size_, (f->size_ - ids_end) / 8);
    throw Error(fmt::format("token_file: {} is truncated or damaged: its header counts {} tokens in {} documents ({} "
                            "bytes); {}", path, header.tokens, header.documents, expected, where));
  }
  f->tokens_ = header.tokens, f->documents_ = header.documents, f->vocab_size_ = header.vocab_size;
  const auto* base = static_cast<const char*>(f->map_);
  f->ids_ = reinterpret_cast<const uint32_t*>(base + kHeaderBytes);
  f->offsets_ = base + kHeaderBytes + 4 * header.tokens;
  for (uint64_t i = 0; i <= f->documents_; ++i) {
    uint64_t at = f->offset(i);
    bool ordered = i == 0 ? at == 0 : at >= f->offset(i - 1);
    if (!ordered || at > f->tokens_ || (i == f->documents_ && at != f->tokens_))
      throw Error(fmt::format("token_file: {}: document offset {} (at byte {}) is {}, out of order or past the {} "
                              "tokens", path, i, kHeaderBytes + 4 * header.tokens + 8 * i, at, f->tokens_));
  }
  return f;
}

uint64_t TokenFile::offset(uint64_t i) const {
  uint64_t at;
  std::memcpy(&at, offsets_ + 8 * i, sizeof at);
  return at;
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(map_, size_);
}

const std::vector<uint64_t>& TokenFile::epoch_order(uint64_t seed, uint64_t epoch, uint64_t n) const {
  if (order_.size() == n && order_seed_ == seed && order_epoch_ == epoch) return order_;
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), 0);
  std::mt19937_64 random(seed * 0x9E3779B97F4A7C15ull + epoch);
  for (uint64_t i = n - 1; i > 0; --i) std::swap(order_[i], order_[random() % (i + 1)]);
  order_seed_ = seed;
  order_epoch_ = epoch;
  return order_;
}

void TokenFile::sample_positions(uint64_t sample, int64_t seq, int64_t* out) const {
  const uint64_t start = sample * static_cast<uint64_t>(seq);
  // the first document starting after the row's first token: binary search over the starts
  uint64_t lo = 0, hi = documents_;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (begin(mid) <= start) lo = mid + 1;
    else hi = mid;
  }
  uint64_t next = lo < documents_ ? begin(lo) : UINT64_MAX;
  int64_t position = 0;
  for (int64_t t = 0; t < seq; ++t, ++position) {
    const uint64_t at = start + static_cast<uint64_t>(t);
    while (at == next) {  // a document starts here (empty ones start here too)
      position = 0;
      ++lo;
      next = lo < documents_ ? begin(lo) : UINT64_MAX;
    }
    out[t] = position;
  }
}

std::vector<uint64_t> TokenFile::batch_samples(uint64_t step, int64_t batch, int64_t seq, int rank, int ranks,
                                               uint64_t seed) const {
  if (batch < 1 || seq < 1 || ranks < 1 || rank < 0 || rank >= ranks || batch % ranks != 0)
    throw Error(fmt::format("token_file: a batch of {} rows does not split over {} ranks (rank {}), or seq {} < 1",
                            batch, ranks, rank, seq));
  const uint64_t n = samples(seq);
  if (n < static_cast<uint64_t>(batch))
    throw Error(fmt::format("token_file: {} holds {} samples of {} tokens, fewer than a batch of {}", path_, n, seq,
                            batch));
  const uint64_t rows = static_cast<uint64_t>(batch / ranks);
  std::vector<uint64_t> out;
  std::lock_guard<std::mutex> lock(order_mutex_);
  for (uint64_t r = 0; r < rows; ++r) {
    const uint64_t global = step * static_cast<uint64_t>(batch) + static_cast<uint64_t>(rank) * rows + r;
    const uint64_t epoch = global / n, at = global % n;
    out.push_back(seed == 0 ? at : epoch_order(seed, epoch, n)[at]);
  }
  return out;
}

}  // namespace slapo::text

// A tokenized corpus on disk (slapo-lua tokenize): every document's token ids one after another,
// then where each document starts. Read mapped, so training touches only the pages it uses and no
// rank copies the corpus into memory. No Lua.
//
// Layout, little-endian: a 32-byte header {"SLAPOTK1", u64 tokens, u64 documents, u32 vocab_size,
// u32 0}, then `tokens` u32 ids, then `documents + 1` u64 offsets (the first 0, the last `tokens`).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace slapo::text {

/// Writes a token file: documents added one by one, the offsets and header at finish; the file
/// appears whole (written beside, then renamed) or not at all.
class TokenFileWriter {
 public:
  TokenFileWriter(const std::string& path, uint32_t vocab_size);
  ~TokenFileWriter();
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;

  /// Appends one document; raises naming `where` (file:line) for an id past the vocabulary.
  void add(const std::vector<int64_t>& ids, const std::string& where);
  void finish();
  uint64_t tokens() const { return offsets_.back(); }
  uint64_t documents() const { return offsets_.size() - 1; }

 private:
  std::string path_, partial_;
  uint32_t vocab_size_;
  std::vector<uint64_t> offsets_{0};
  struct Out;
  std::unique_ptr<Out> out_;
};

/// A token file, mapped read-only.
class TokenFile {
 public:
  /// Maps `path`; raises naming the file and the offset where it is not a whole token file
  /// (another format, truncated mid-record, offsets out of order).
  static std::shared_ptr<TokenFile> open(const std::string& path);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  uint64_t tokens() const { return tokens_; }
  uint64_t documents() const { return documents_; }
  uint32_t vocab_size() const { return vocab_size_; }
  const uint32_t* ids() const { return ids_; }
  /// Where document `i` starts and ends (in tokens).
  uint64_t begin(uint64_t i) const { return offset(i); }
  uint64_t end(uint64_t i) const { return offset(i + 1); }

  /// Fixed-length samples packed from the documents in order (sample k: tokens [k seq, (k+1) seq);
  /// the tail shorter than `seq` unused), how many there are.
  uint64_t samples(int64_t seq) const { return seq > 0 ? tokens_ / static_cast<uint64_t>(seq) : 0; }
  /// The sample numbers of global step `step`'s batch of `batch` rows for rank `rank` of `ranks`
  /// (its `batch / ranks` rows, in order): every epoch visits the samples once in an order shuffled
  /// by `seed` (0: in file order), the same for any number of ranks. Raises on a batch the ranks do
  /// not divide or a corpus with fewer samples than a batch.
  std::vector<uint64_t> batch_samples(uint64_t step, int64_t batch, int64_t seq, int rank, int ranks,
                                      uint64_t seed) const;
  /// Packed sequences kept apart: each token's position in its piece of a document within sample
  /// `sample` (0 at the row's start and at each document that starts in the row), into `out[seq]`.
  /// A model given these positions attends only inside each piece (transformers' packing).
  void sample_positions(uint64_t sample, int64_t seq, int64_t* out) const;

 private:
  TokenFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  uint64_t tokens_ = 0, documents_ = 0;
  uint32_t vocab_size_ = 0;
  const uint32_t* ids_ = nullptr;
  const char* offsets_ = nullptr;  // u64s 4-byte aligned when the token count is odd: read by copying
  uint64_t offset(uint64_t i) const;
  /// The order of the `n` samples in `epoch` under `seed`, kept for the next call (a training run
  /// asks for the same epoch's order step after step); call with order_mutex_ held.
  const std::vector<uint64_t>& epoch_order(uint64_t seed, uint64_t epoch, uint64_t n) const;
  mutable std::mutex order_mutex_;
  mutable std::vector<uint64_t> order_;
  mutable uint64_t order_seed_ = 0, order_epoch_ = 0;
};

}  // namespace slapo::text

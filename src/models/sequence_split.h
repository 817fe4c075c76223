// How context parallelism splits a model's sequence over ranks (sch:context_parallel): the tokens
// this rank keeps, attention over every rank's keys, and the whole sequence's loss. The zoo's
// modules call it; the primitive implements it over a group (primitives/context_parallel.cpp).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "core/module.h"

namespace slapo {

class SequenceSplit {
 public:
  virtual ~SequenceSplit() = default;
  /// The ranks the sequence is split over, and their group's id (dist::group_by_id).
  virtual int ranks() const = 0;
  virtual int group_id() const = 0;
  /// This rank's tokens of a sequence of `seq`: their global indices [s], int64 on `device`. Throws
  /// naming `who` when `seq` does not split.
  virtual at::Tensor local_indices(int64_t seq, const at::Device& device, const char* who) const = 0;
  /// Causal attention of this rank's queries [B, H, s, D] over every rank's keys and values
  /// [B, KVH, s, D], by the tokens' global indices in a sequence of s x ranks; `window` > 0: only the
  /// keys less than `window` positions before each query (a sliding window); `documents` (defined:
  /// packed documents) [B, s x ranks]: each token's document by global index, a query seeing only
  /// its own document's keys.
  virtual at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                            int64_t window = 0, const at::Tensor& documents = at::Tensor()) const = 0;
  /// Throws naming `where` (a model) when its `heads` attention heads cannot be split as `attend`
  /// needs (Ulysses' all-to-all splits them over the ranks); the ring takes any.
  virtual void check_heads(int64_t /*heads*/, const std::string& /*where*/) const {}
  /// The whole sequence's mean loss from this rank's summed loss and count of labelled tokens: the
  /// mean on every rank, its gradient this rank's part x ranks, so that averaging gradients over
  /// the ranks (as data parallelism does) sums every rank's part.
  virtual at::Tensor mean_loss(const at::Tensor& local_sum, const at::Tensor& local_count) const = 0;
  virtual std::string describe() const = 0;
};

/// A zoo root whose sequences context_parallel can split (CausalLM keeps the split and shards each
/// batch's tokens and labels; the family gives it to its base model and attentions).
class SplitsSequences {
 public:
  virtual ~SplitsSequences() = default;
  /// Gives the base model and every attention `split`, or throws naming what cannot split (a
  /// sliding window, attention dropout) and changes nothing.
  virtual void split_sequences(const std::shared_ptr<const SequenceSplit>& split, const std::string& where) = 0;
  virtual std::shared_ptr<const SequenceSplit> sequence_split() const = 0;
};

/// Gives a model that splits its sequences (LLaMA's family, GPT-2) its split. Throws naming the
/// model and what it cannot split.
void set_sequence_split(Module& root, const std::shared_ptr<const SequenceSplit>& split, const std::string& where);
/// The split a model's root holds, or null.
std::shared_ptr<const SequenceSplit> sequence_split_of(const Module& root);

/// The whole sequence's causal-LM loss from this rank's tokens' logits [B, S/N, V] and the whole
/// rows' labels [B, S] (each token's label the next token's, wherever it lives): the mean on every
/// rank, its gradient this rank's part x N (SequenceSplit::mean_loss).
at::Tensor split_causal_lm_loss(const SequenceSplit& split, const at::Tensor& local_logits, const at::Tensor& labels,
                                const char* who);

}  // namespace slapo

// Parts of BERT's encoder that its relatives (RoBERTa, ALBERT) build from: the embeddings and the
// masked-LM decoder tied to them.
#pragma once

#include "models/config.h"
#include "models/layers.h"

namespace slapo {

/// Word, position and token-type embeddings, LayerNorm and dropout, `width` wide, the class named
/// after the config's family (BertEmbeddings, RobertaEmbeddings, AlbertEmbeddings).
std::shared_ptr<Module> make_bert_embeddings(const ModelConfig& c, const at::TensorOptions& o, int64_t width);

/// An MLM head's decoder: `width` -> vocabulary, its weight the word embedding matrix (unless
/// tie_word_embeddings is false) and its bias the head's own `bias`, which this registers on `head`.
std::shared_ptr<Linear> tied_decoder(Module& head, const ModelConfig& c, const at::TensorOptions& o,
                                     const at::Tensor& word_embeddings, int64_t width);

}  // namespace slapo

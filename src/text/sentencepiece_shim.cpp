// libslapo_sentencepiece.so: text/sentencepiece_shim.h's entry points over libsentencepiece.
#include "text/sentencepiece_shim.h"

#include <sentencepiece_processor.h>

namespace {
sentencepiece::SentencePieceProcessor& processor(void* sp) {
  return *static_cast<sentencepiece::SentencePieceProcessor*>(sp);
}
}  // namespace

extern "C" {

void* slapo_sp_open(const char* path, std::string* error) {
  auto* sp = new sentencepiece::SentencePieceProcessor();
  auto status = sp->Load(path);
  if (status.ok()) return sp;
  *error = status.ToString();
  delete sp;
  return nullptr;
}

void slapo_sp_close(void* sp) { delete &processor(sp); }

bool slapo_sp_encode(void* sp, const std::string* text, std::vector<int>* ids, std::string* error) {
  auto status = processor(sp).Encode(*text, ids);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

bool slapo_sp_decode(void* sp, const std::vector<int>* ids, std::string* text, std::string* error) {
  auto status = processor(sp).Decode(*ids, text);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

int slapo_sp_piece_size(void* sp) { return processor(sp).GetPieceSize(); }

int slapo_sp_piece_id(void* sp, const std::string* piece) {
  int id = processor(sp).PieceToId(*piece);
  // PieceToId answers unk's id for a piece it lacks
  return id == processor(sp).unk_id() && processor(sp).IdToPiece(id) != *piece ? -1 : id;
}

int slapo_sp_special_id(void* sp, int which) { return which == 0 ? processor(sp).bos_id() : processor(sp).eos_id(); }

}  // extern "C"

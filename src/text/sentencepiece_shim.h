// The C entry points of libslapo_sentencepiece.so, a small module over Debian's libsentencepiece.
// That library carries its own copy of protobuf with exported symbols, which clash with the
// protobuf LibTorch loads (the process crashes in protobuf's static initialisers when both are
// linked in), so slapo-lua never links it: text/sentencepiece_model.cpp opens this module with
// dlopen(RTLD_LOCAL | RTLD_DEEPBIND), which keeps each copy of protobuf to its own library.
// Both sides are this project's C++ built by one compiler, so std types cross the boundary.
#pragma once

#include <string>
#include <vector>

extern "C" {
/// A processor for the model at `path`, or null with `error` set.
void* slapo_sp_open(const char* path, std::string* error);
void slapo_sp_close(void* sp);
bool slapo_sp_encode(void* sp, const std::string* text, std::vector<int>* ids, std::string* error);
bool slapo_sp_decode(void* sp, const std::vector<int>* ids, std::string* text, std::string* error);
int slapo_sp_piece_size(void* sp);
/// The piece's id, -1 when the vocabulary lacks it.
int slapo_sp_piece_id(void* sp, const std::string* piece);
/// bos (0), eos (1): the id, -1 when the model has none.
int slapo_sp_special_id(void* sp, int which);
}

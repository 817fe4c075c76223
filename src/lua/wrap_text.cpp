// slapo.tokenizer(dir_or_file): a checkpoint's tokenizer (text/tokenizer.h): tok:encode(text) -> ids,
// tok:encode(first, second) -> ids, type_ids, tok:decode(ids) -> text, tok.vocab_size, tok.bos_id,
// tok.eos_id.
#include <filesystem>

#include "core/error.h"
#include "lua/runtime.h"
#include "lua/wrap.h"
#include "text/tokenizer.h"
#include "text/token_file.h"

namespace slapo {

namespace {

using Tokenizer = std::shared_ptr<text::Tokenizer>;

const text::Tokenizer& check_tokenizer(lua_State* L, int idx) {
  return **static_cast<Tokenizer*>(luaL_checkudata(L, idx, "slapo.Tokenizer"));
}

// tokenizer(path): a Hugging Face tokenizer.json or SentencePiece tokenizer.model (the file, or the
// directory holding it), or GPT-2's encoder.json + vocab.bpe in a directory
int w_tokenizer(lua_State* L) {
  lx_check_arg_count(L, 1, "tokenizer", "slapo.tokenizer(dir_or_file)");
  std::string path = luaL_checkstring(L, 1);
  Tokenizer tok = text::open_tokenizer(path);
  new (lua_newuserdata(L, sizeof(Tokenizer))) Tokenizer(std::move(tok));
  luaL_getmetatable(L, "slapo.Tokenizer");
  lua_setmetatable(L, -2);
  return 1;
}

void push_ids(lua_State* L, const std::vector<int64_t>& ids) {
  lua_createtable(L, static_cast<int>(ids.size()), 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    lua_pushnumber(L, static_cast<lua_Number>(ids[i]));
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
}

// tok:encode(text) -> {id, ...} (0-based ids); tok:encode(first, second) -> ids, type_ids (the
// post-processor's pair template)
int w_encode(lua_State* L) {
  size_t size = 0, second_size = 0;
  const char* text = luaL_checklstring(L, 2, &size);
  if (lua_isnoneornil(L, 3)) {
    push_ids(L, check_tokenizer(L, 1).encode(std::string(text, size)));
    return 1;
  }
  const char* second = luaL_checklstring(L, 3, &second_size);
  auto pair = check_tokenizer(L, 1).encode_pair(std::string(text, size), std::string(second, second_size));
  push_ids(L, pair.ids);
  push_ids(L, pair.type_ids);
  return 2;
}

// tok:decode({id, ...}) -> text
int w_decode(lua_State* L) {
  const auto& tok = check_tokenizer(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  std::vector<int64_t> ids;
  for (size_t i = 1; i <= lua_objlen(L, 2); ++i) {
    lua_rawgeti(L, 2, static_cast<int>(i));
    if (!lua_isnumber(L, -1))
      throw Error(fmt::format("tokenizer:decode: ids[{}] is a {}; give a table of token ids (numbers)", i,
                              luaL_typename(L, -1)));
    ids.push_back(lx_check_integer_value(lua_tonumber(L, -1), "tokenizer:decode's ids", -9.0e15, 9.0e15,
                                         "tokenizer:decode"));
    lua_pop(L, 1);
  }
  std::string text = tok.decode(ids);
  lua_pushlstring(L, text.data(), text.size());
  return 1;
}

// tok.vocab_size, tok.bos_id, tok.eos_id (GPT-2: <|endoftext|> both; nil when unknown)
int w_index(lua_State* L) {
  const auto& tok = check_tokenizer(L, 1);
  std::string key = luaL_checkstring(L, 2);
  if (key == "vocab_size") lua_pushnumber(L, static_cast<lua_Number>(tok.vocab_size()));
  else if (key == "bos_id" || key == "eos_id") {
    auto id = key == "bos_id" ? tok.bos_id() : tok.eos_id();
    if (id) lua_pushnumber(L, static_cast<lua_Number>(*id));
    else lua_pushnil(L);
  } else {
    return luaL_error(L, "tokenizer: no field '%s' (fields: vocab_size, bos_id, eos_id; methods: encode, decode)",
                      key.c_str());
  }
  return 1;
}

int w_gc(lua_State* L) {
  static_cast<Tokenizer*>(luaL_checkudata(L, 1, "slapo.Tokenizer"))->~Tokenizer();
  return 0;
}

// token_file(path): a file slapo-lua tokenize wrote, mapped
using TokenFile = std::shared_ptr<text::TokenFile>;

const text::TokenFile& check_token_file(lua_State* L, int idx) {
  return **static_cast<TokenFile*>(luaL_checkudata(L, idx, "slapo.TokenFile"));
}

int w_token_file(lua_State* L) {
  lx_check_arg_count(L, 1, "token_file", "slapo.token_file(path)");
  auto file = text::TokenFile::open(luaL_checkstring(L, 1));
  new (lua_newuserdata(L, sizeof(TokenFile))) TokenFile(std::move(file));
  luaL_getmetatable(L, "slapo.TokenFile");
  lua_setmetatable(L, -2);
  return 1;
}

at::Tensor ids_tensor(const uint32_t* ids, int64_t count) {
  auto t = torch::empty({count}, torch::kLong);
  auto* out = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) out[i] = ids[i];
  return t;
}

// file:document(i) -> the ids of document i (1 .. file.documents) as a 1-D int64 tensor
int w_document(lua_State* L) {
  const auto& f = check_token_file(L, 1);
  const auto i = lx_check_integer_value(luaL_checknumber(L, 2), "token_file:document's number", 1,
                                        std::max<double>(1, static_cast<double>(f.documents())), "token_file:document");
  if (static_cast<uint64_t>(i) > f.documents())
    throw Error(fmt::format("token_file:document: the file has no documents (asked for {})", i));
  lx_push_tensor(L, ids_tensor(f.ids() + f.begin(i - 1), static_cast<int64_t>(f.end(i - 1) - f.begin(i - 1))));
  return 1;
}

// file:batch{step =, batch =, seq =, rank = 0, ranks = 1, seed = 0, positions = false} -> [batch / ranks, seq]
// int64: global step `step`'s rows for this rank (TokenFile::batch_samples); with positions, also
// each token's position in its document's piece of the row (TokenFile::sample_positions)
int w_batch(lua_State* L) {
  const char* fn = "token_file:batch";
  const auto& f = check_token_file(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  lx_check_option_keys(L, 2, {"step", "batch", "seq", "rank", "ranks", "seed", "positions"}, fn);
  const bool positions = lx_opt_bool(L, 2, "positions", false, fn);
  auto integer = [&](const char* key, double fallback, double lo, double hi) {
    return lx_check_integer_value(lx_opt_number(L, 2, key, fallback, fn), key, lo, hi, fn);
  };
  const int64_t step = integer("step", -1, 1, 9.0e15), batch = integer("batch", -1, 1, 1 << 30);
  const int64_t seq = integer("seq", -1, 1, 1 << 30), ranks = integer("ranks", 1, 1, 1 << 20);
  const int64_t rank = integer("rank", 0, 0, static_cast<double>(ranks - 1)), seed = integer("seed", 0, 0, 9.0e15);
  auto samples = f.batch_samples(static_cast<uint64_t>(step - 1), batch, seq, static_cast<int>(rank),
                                 static_cast<int>(ranks), static_cast<uint64_t>(seed));
  auto out = torch::empty({static_cast<int64_t>(samples.size()), seq}, torch::kLong);
  for (size_t r = 0; r < samples.size(); ++r)
    out[static_cast<int64_t>(r)].copy_(ids_tensor(f.ids() + samples[r] * static_cast<uint64_t>(seq), seq));
  lx_push_tensor(L, out);
  if (!positions) return 1;
  auto where = torch::empty({static_cast<int64_t>(samples.size()), seq}, torch::kLong);
  for (size_t r = 0; r < samples.size(); ++r)
    f.sample_positions(samples[r], seq, where[static_cast<int64_t>(r)].data_ptr<int64_t>());
  lx_push_tensor(L, where);
  return 2;
}

int w_token_file_index(lua_State* L) {
  const auto& f = check_token_file(L, 1);
  std::string key = luaL_checkstring(L, 2);
  if (key == "tokens") lua_pushnumber(L, static_cast<lua_Number>(f.tokens()));
  else if (key == "documents") lua_pushnumber(L, static_cast<lua_Number>(f.documents()));
  else if (key == "vocab_size") lua_pushnumber(L, static_cast<lua_Number>(f.vocab_size()));
  else
    return luaL_error(L, "token_file: no field '%s' (fields: tokens, documents, vocab_size; methods: document, batch)",
                      key.c_str());
  return 1;
}

int w_token_file_gc(lua_State* L) {
  static_cast<TokenFile*>(luaL_checkudata(L, 1, "slapo.TokenFile"))->~TokenFile();
  return 0;
}

const luaL_Reg token_file_methods[] = {{"document", w_document}, {"batch", w_batch}, {nullptr, nullptr}};
const luaL_Reg token_file_meta[] = {{"__gc", w_token_file_gc}, {nullptr, nullptr}};

const luaL_Reg tokenizer_methods[] = {{"encode", w_encode}, {"decode", w_decode}, {nullptr, nullptr}};
const luaL_Reg tokenizer_meta[] = {{"__gc", w_gc}, {nullptr, nullptr}};

}  // namespace

void open_text(lua_State* L) {
  lx_new_class(L, "slapo.Tokenizer", tokenizer_methods, tokenizer_meta, w_index);
  lx_set_func(L, "tokenizer", w_tokenizer);
  lx_new_class(L, "slapo.TokenFile", token_file_methods, token_file_meta, w_token_file_index);
  lx_set_func(L, "token_file", w_token_file);
}

}  // namespace slapo

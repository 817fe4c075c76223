// slapo.tokenizer(dir_or_file): a checkpoint's tokenizer (text/byte_level_bpe.h): tok:encode(text) -> ids,
// tok:decode(ids) -> text, tok.vocab_size, tok.bos_id, tok.eos_id.
#include <filesystem>

#include "core/error.h"
#include "lua/runtime.h"
#include "lua/wrap.h"
#include "text/byte_level_bpe.h"

namespace slapo {

namespace {

using Tokenizer = std::shared_ptr<text::ByteLevelBpe>;

const text::ByteLevelBpe& check_tokenizer(lua_State* L, int idx) {
  return **static_cast<Tokenizer*>(luaL_checkudata(L, idx, "slapo.Tokenizer"));
}

// tokenizer(path): a Hugging Face tokenizer.json (the file, or the directory holding it), or
// GPT-2's encoder.json + vocab.bpe in a directory
int w_tokenizer(lua_State* L) {
  lx_check_arg_count(L, 1, "tokenizer", "slapo.tokenizer(dir_or_file)");
  std::string path = luaL_checkstring(L, 1);
  namespace fs = std::filesystem;
  const char* kinds = "read: tokenizer.json of a byte-level BPE (LLaMA-3, GPT-2), or GPT-2's encoder.json and vocab.bpe";
  Tokenizer tok;
  if (fs::is_regular_file(path)) {
    if (fs::path(path).filename() == "tokenizer.model")
      throw Error(fmt::format("tokenizer: {} is a SentencePiece model, not read yet ({})", path, kinds));
    tok = text::ByteLevelBpe::load_tokenizer_json(path);
  } else if (!fs::is_directory(path)) {
    throw Error(fmt::format("tokenizer: {} does not exist; give a tokenizer.json, or the directory of a checkpoint "
                            "that holds one (or GPT-2's encoder.json and vocab.bpe, e.g. data/gpt2-bpe from "
                            "scripts/fetch-data)", path));
  } else if (fs::exists(fs::path(path) / "tokenizer.json")) {
    tok = text::ByteLevelBpe::load_tokenizer_json((fs::path(path) / "tokenizer.json").string());
  } else if (fs::exists(fs::path(path) / "encoder.json") && fs::exists(fs::path(path) / "vocab.bpe")) {
    tok = text::ByteLevelBpe::load(path);
  } else {
    throw Error(fmt::format("tokenizer: {} holds no tokenizer file that is read ({}{})", path, kinds,
                            fs::exists(fs::path(path) / "tokenizer.model") ? "; its tokenizer.model is SentencePiece's, "
                                                                              "not read yet" : ""));
  }
  new (lua_newuserdata(L, sizeof(Tokenizer))) Tokenizer(std::move(tok));
  luaL_getmetatable(L, "slapo.Tokenizer");
  lua_setmetatable(L, -2);
  return 1;
}

// tok:encode(text) -> {id, ...} (0-based ids)
int w_encode(lua_State* L) {
  size_t size = 0;
  const char* text = luaL_checklstring(L, 2, &size);
  auto ids = check_tokenizer(L, 1).encode(std::string(text, size));
  lua_createtable(L, static_cast<int>(ids.size()), 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    lua_pushnumber(L, static_cast<lua_Number>(ids[i]));
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
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

const luaL_Reg tokenizer_methods[] = {{"encode", w_encode}, {"decode", w_decode}, {nullptr, nullptr}};
const luaL_Reg tokenizer_meta[] = {{"__gc", w_gc}, {nullptr, nullptr}};

}  // namespace

void open_text(lua_State* L) {
  lx_new_class(L, "slapo.Tokenizer", tokenizer_methods, tokenizer_meta, w_index);
  lx_set_func(L, "tokenizer", w_tokenizer);
}

}  // namespace slapo

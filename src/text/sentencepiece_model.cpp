// SentencePiece's tokenizer.model through libslapo_sentencepiece.so (text/sentencepiece_shim.h says
// why it is a module of its own, opened here at first use).
#include "text/sentencepiece_model.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>

#include "core/data_dirs.h"
#include "core/error.h"
#include "io/json_file.h"
#include "text/sentencepiece_shim.h"

#ifndef SLAPO_WITH_SENTENCEPIECE  // CMake defines it for this file, 0 or 1
#define SLAPO_WITH_SENTENCEPIECE 0
#endif

namespace slapo::text {

namespace {

constexpr const char* kModule = "libslapo_sentencepiece.so";

// The module's entry points, resolved once.
struct ShimApi {
  decltype(&slapo_sp_open) open;
  decltype(&slapo_sp_close) close;
  decltype(&slapo_sp_encode) encode;
  decltype(&slapo_sp_decode) decode;
  decltype(&slapo_sp_piece_size) piece_size;
  decltype(&slapo_sp_piece_id) piece_id;
  decltype(&slapo_sp_special_id) special_id;
};

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLAPO_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(SLAPO_ASAN)
constexpr bool kSanitized = true;  // the sanitizer runtime refuses RTLD_DEEPBIND
#else
constexpr bool kSanitized = false;
#endif

const ShimApi& shim() {
  static std::once_flag once;
  static ShimApi api;
  static std::string failure;
  std::call_once(once, [] {
    if (kSanitized) {
      failure = "this build runs under AddressSanitizer, which cannot open libsentencepiece's module "
                "(RTLD_DEEPBIND); use a plain build";
      return;
    }
    std::string path = module_path(kModule);
    void* handle = path.empty() ? nullptr : dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!handle) {
      failure = path.empty() ? fmt::format("{} is not beside the program (build it with -DSLAPO_SENTENCEPIECE=ON)",
                                           kModule)
                             : fmt::format("opening {} failed: {}", path, dlerror());
      return;
    }
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
      if (!fn) failure = fmt::format("{} has no {}", path, name);
    };
    get(api.open, "slapo_sp_open");
    get(api.close, "slapo_sp_close");
    get(api.encode, "slapo_sp_encode");
    get(api.decode, "slapo_sp_decode");
    get(api.piece_size, "slapo_sp_piece_size");
    get(api.piece_id, "slapo_sp_piece_id");
    get(api.special_id, "slapo_sp_special_id");
  });
  if (!failure.empty()) throw Error("tokenizer: SentencePiece models cannot be read here: " + failure);
  return api;
}

// add_bos_token / add_eos_token of tokenizer_config.json beside the model, when it says.
void read_config_flags(const std::filesystem::path& model_path, bool& add_bos, bool& add_eos) {
  auto config_path = model_path.parent_path() / "tokenizer_config.json";
  if (!std::filesystem::exists(config_path)) return;
  auto config = read_json_file(config_path.string(), "tokenizer");
  auto flag = [&](const char* key, bool& out) {
    if (!config.contains(key) || config[key].is_null()) return;
    if (!config[key].is_boolean())
      throw Error(fmt::format("tokenizer: {}: {} must be true or false, got {}", config_path.string(), key,
                              config[key].dump()));
    out = config[key].get<bool>();
  };
  flag("add_bos_token", add_bos);
  flag("add_eos_token", add_eos);
}

std::optional<int64_t> id_or_none(int id) { return id < 0 ? std::nullopt : std::optional<int64_t>(id); }

}  // namespace

SentencePieceModel::~SentencePieceModel() {
  if (sp_) shim().close(sp_);
}

std::shared_ptr<SentencePieceModel> SentencePieceModel::load(const std::string& path) {
  if (!SLAPO_WITH_SENTENCEPIECE)
    throw Error(fmt::format("tokenizer: {} is a SentencePiece model, and this build has no libsentencepiece "
                            "(configure with -DSLAPO_SENTENCEPIECE=ON and libsentencepiece-dev installed)", path));
  const auto& api = shim();
  std::shared_ptr<SentencePieceModel> model(new SentencePieceModel());
  model->path_ = path;
  std::string error;
  model->sp_ = api.open(path.c_str(), &error);
  if (!model->sp_)
    throw Error(fmt::format("tokenizer: {} is not a SentencePiece model libsentencepiece can read ({})", path, error));
  model->vocab_size_ = api.piece_size(model->sp_);
  model->bos_ = id_or_none(api.special_id(model->sp_, 0));
  model->eos_ = id_or_none(api.special_id(model->sp_, 1));
  model->add_bos_ = model->bos_.has_value();
  read_config_flags(path, model->add_bos_, model->add_eos_);
  if (model->add_bos_ && !model->bos_id())
    throw Error(fmt::format("tokenizer: {} asks for a BOS token (add_bos_token) but the model has none", path));
  if (model->add_eos_ && !model->eos_id())
    throw Error(fmt::format("tokenizer: {} asks for an EOS token (add_eos_token) but the model has none", path));
  return model;
}

std::vector<int64_t> SentencePieceModel::encode(const std::string& text) const {
  std::vector<int> pieces;
  std::string error;
  if (!shim().encode(sp_, &text, &pieces, &error))
    throw Error(fmt::format("tokenizer: encoding with {} failed: {}", path_, error));
  std::vector<int64_t> ids;
  ids.reserve(pieces.size() + 2);
  if (add_bos_) ids.push_back(*bos_id());
  ids.insert(ids.end(), pieces.begin(), pieces.end());
  if (add_eos_) ids.push_back(*eos_id());
  return ids;
}

std::string SentencePieceModel::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> pieces;
  pieces.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size())
      throw Error(fmt::format("tokenizer:decode: id {} (at {}) is outside the vocabulary of {} (0 to {})", ids[i],
                              i + 1, path_, vocab_size() - 1));
    pieces.push_back(static_cast<int>(ids[i]));
  }
  std::string text, error;
  if (!shim().decode(sp_, &pieces, &text, &error))
    throw Error(fmt::format("tokenizer: decoding with {} failed: {}", path_, error));
  return text;
}

std::optional<int64_t> SentencePieceModel::token_id(const std::string& token) const {
  return id_or_none(shim().piece_id(sp_, &token));
}

}  // namespace slapo::text

// tokenizer.json as a pipeline of Hugging Face's stages.
#include "text/pipeline_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <functional>

#include <fmt/format.h>

#include "core/error.h"
#include "text/bpe_model.h"
#include "text/json_fields.h"
#include "text/unicode_text.h"
#include "text/unigram_model.h"
#include "text/wordpiece.h"

namespace slapo::text {

std::shared_ptr<PipelineTokenizer> PipelineTokenizer::load(const std::string& path) {
  return from_tokenizer_json(parse_json_file(path), path);
}

std::shared_ptr<PipelineTokenizer> PipelineTokenizer::from_tokenizer_json(const nlohmann::json& j,
                                                                          const std::string& path) {
  if (!unicode::available())
    throw Error("tokenizer: this build has no utf8proc (built with -DSLAPO_PCRE2=OFF); tokenizer.json's normalizers "
                "and pre-tokenizers need it");
  std::shared_ptr<PipelineTokenizer> tok(new PipelineTokenizer());
  const auto& model = field(j, "model", path);
  const std::string type = model.value("type", "");
  if (type == "WordPiece") tok->model_ = std::make_unique<WordPiece>(model, path);
  else if (type == "BPE") tok->model_ = std::make_unique<BpeModel>(model, path);
  else if (type == "Unigram") tok->model_ = std::make_unique<UnigramModel>(model, path);
  else
    throw Error(fmt::format("tokenizer: {}: model type '{}' is not read yet (read: BPE, WordPiece, Unigram)", path,
                            type));
  tok->normalizer_ = make_normalizer(j.value("normalizer", nlohmann::json()), path);
  tok->pre_tokenizer_ = make_pre_tokenizer(j.value("pre_tokenizer", nlohmann::json()), path);
  tok->decoder_ = Decoder(j.value("decoder", nlohmann::json()), path);
  tok->post_ = read_post_processor(j.value("post_processor", nlohmann::json()), path);

  int64_t size = 0;
  for (auto& [token, id] : tok->model_->vocab()) size = std::max(size, id + 1);
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (auto& each : j["added_tokens"]) {
      AddedToken added;
      const std::string content = field(each, "content", path + "'s added token").get<std::string>();
      const auto& id = field(each, "id", path + "'s added token '" + content + "'");
      if (!id.is_number_integer() || id.get<int64_t>() < 0)
        throw Error(fmt::format("tokenizer: {}: added token '{}' has id {}; ids are numbers from 0", path, content,
                                id.dump()));
      if (content.empty()) throw Error(fmt::format("tokenizer: {}: added token {} is empty", path, id.dump()));
      if (each.value("single_word", false))
        throw Error(fmt::format("tokenizer: {}: added token '{}' has single_word = true, not read yet", path, content));
      added.id = id.get<int64_t>();
      added.lstrip = each.value("lstrip", false);
      added.rstrip = each.value("rstrip", false);
      bool normalized = each.value("normalized", !each.value("special", false));
      added.content = normalized ? tok->normalizer_(content) : content;
      if (added.content.empty()) continue;  // normalized away: it can never match
      (normalized ? tok->normalized_added_ : tok->raw_added_).add(added);
      tok->added_ids_[content] = added.id;
      size = std::max(size, added.id + 1);
    }
  tok->raw_added_.sort_longest_first();
  tok->normalized_added_.sort_longest_first();
  tok->tokens_.assign(static_cast<size_t>(size), std::string());
  for (auto& [token, id] : tok->model_->vocab()) tok->tokens_[static_cast<size_t>(id)] = token;
  for (auto& [content, id] : tok->added_ids_) tok->tokens_[static_cast<size_t>(id)] = content;
  tok->first_tokens_.resize(tok->tokens_.size());  // decode's forms, once: a text's first token, any other
  for (size_t id = 0; id < tok->tokens_.size(); ++id) {
    tok->first_tokens_[id] = tok->decoder_.token_form(tok->tokens_[id], true);
    tok->tokens_[id] = tok->decoder_.token_form(std::move(tok->tokens_[id]), false);
  }

  // bos and eos: tokenizer_config.json's, else the post-processor's tokens around a text ([CLS], [SEP])
  namespace fs = std::filesystem;
  if (!tok->post_.single.prefix.empty()) tok->bos_ = tok->post_.single.prefix.front();
  if (!tok->post_.single.suffix.empty()) tok->eos_ = tok->post_.single.suffix.back();
  auto config_path = fs::path(path).parent_path() / "tokenizer_config.json";
  if (fs::exists(config_path)) {
    auto config = parse_json_file(config_path.string());
    if (auto bos = config_token(config, "bos_token")) tok->bos_ = tok->token_id(*bos);
    if (auto eos = config_token(config, "eos_token")) tok->eos_ = tok->token_id(*eos);
  }
  return tok;
}

void PipelineTokenizer::encode_segment(const std::string& text, bool at_start, std::vector<int64_t>& out) const {
  std::vector<std::string> words;
  normalized_added_.split(
      normalizer_(text),
      [&](const std::string& plain, size_t begin) {
        words.clear();
        pre_tokenizer_(plain, at_start && begin == 0, words);
        for (auto& word : words) model_->tokenize(word, out);
      },
      [&](int64_t id) { out.push_back(id); });
}

void PipelineTokenizer::encode_text(const std::string& text, std::vector<int64_t>& out) const {
  raw_added_.split(
      text, [&](const std::string& plain, size_t begin) { encode_segment(plain, begin == 0, out); },
      [&](int64_t id) { out.push_back(id); });
}

std::vector<int64_t> PipelineTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> out(post_.single.prefix);
  encode_text(text, out);
  out.insert(out.end(), post_.single.suffix.begin(), post_.single.suffix.end());
  return out;
}

IdsAndTypes PipelineTokenizer::encode_pair(const std::string& first, const std::string& second) const {
  std::vector<int64_t> a, b;
  encode_text(first, a);
  encode_text(second, b);
  return post_.apply_pair(a, b);
}

std::string PipelineTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size())
      throw Error(fmt::format("tokenizer: id {} is outside the vocabulary (0 .. {})", id, vocab_size() - 1));
    tokens.push_back((tokens.empty() ? first_tokens_ : tokens_)[static_cast<size_t>(id)]);
  }
  return decoder_.decode(std::move(tokens));
}

std::optional<int64_t> PipelineTokenizer::token_id(const std::string& token) const {
  if (auto found = added_ids_.find(token); found != added_ids_.end()) return found->second;
  if (auto found = model_->vocab().find(token); found != model_->vocab().end()) return found->second;
  return std::nullopt;
}

}  // namespace slapo::text

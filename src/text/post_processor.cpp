// tokenizer.json's post-processors, as Hugging Face's encode applies them to one text.
#include "text/post_processor.h"

#include <fmt/format.h>

#include "core/error.h"
#include "text/json_fields.h"

namespace slapo::text {

namespace {

void add_template(const nlohmann::json& p, const std::string& where, Surround& out) {
  bool after = false;
  for (auto& piece : field(p, "single", where + "'s post_processor")) {
    if (piece.contains("Sequence")) {
      after = true;
      continue;
    }
    const std::string name = field(field(piece, "SpecialToken", where + "'s template"), "id", where).get<std::string>();
    const auto& ids = field(field(field(p, "special_tokens", where + "'s post_processor"), name.c_str(), where), "ids",
                            where);
    for (auto& id : ids) (after ? out.suffix : out.prefix).push_back(id.get<int64_t>());
  }
}

// BertProcessing's and RobertaProcessing's "cls": ["[CLS]", 101]
int64_t pair_id(const nlohmann::json& p, const char* key, const std::string& where) {
  const auto& pair = field(p, key, where + "'s post_processor");
  if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number_integer())
    throw Error(fmt::format("tokenizer: {}: post_processor.{} must be [token, id], got {}", where, key, pair.dump()));
  return pair[1].get<int64_t>();
}

void add(const nlohmann::json& p, const std::string& where, Surround& out) {
  if (p.is_null()) return;
  const std::string kind = p.is_object() ? p.value("type", "") : "";
  if (kind == "ByteLevel") return;
  if (kind == "Sequence") {
    for (auto& each : field(p, "processors", where + "'s post_processor")) add(each, where, out);
    return;
  }
  if (kind == "TemplateProcessing") return add_template(p, where, out);
  if (kind == "BertProcessing" || kind == "RobertaProcessing") {  // [CLS] text [SEP], <s> text </s>
    out.prefix.push_back(pair_id(p, "cls", where));
    out.suffix.push_back(pair_id(p, "sep", where));
    return;
  }
  throw Error(fmt::format("tokenizer: {}: post_processor {} is not read yet (read: TemplateProcessing, BertProcessing, "
                          "RobertaProcessing, ByteLevel, Sequence)", where, kind.empty() ? p.dump().substr(0, 80) : kind));
}

}  // namespace

Surround read_post_processor(const nlohmann::json& spec, const std::string& where) {
  Surround out;
  add(spec, where, out);
  return out;
}

}  // namespace slapo::text

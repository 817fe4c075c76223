// tokenizer.json's post-processors, as Hugging Face's encode applies them to one text or a pair.
#include "text/post_processor.h"

#include <fmt/format.h>

#include "core/error.h"
#include "text/json_fields.h"

namespace slapo::text {

namespace {

// TemplateProcessing's `pair` (or `single`): each piece a SpecialToken by name or a Sequence A / B
std::vector<TemplatePart> read_template(const nlohmann::json& p, const char* which, const std::string& where) {
  std::vector<TemplatePart> parts;
  for (auto& piece : field(p, which, where + "'s post_processor")) {
    if (piece.contains("Sequence")) {
      const auto& sequence = piece["Sequence"];
      const std::string id = sequence.value("id", "A");
      if (id != "A" && id != "B")
        throw Error(fmt::format("tokenizer: {}: a template's Sequence is A or B, got '{}'", where, id));
      parts.push_back({id == "A" ? 0 : 1, {}, sequence.value("type_id", int64_t{0})});
      continue;
    }
    const auto& special = field(piece, "SpecialToken", where + "'s template");
    const std::string name = field(special, "id", where).get<std::string>();
    const auto& ids =
        field(field(field(p, "special_tokens", where + "'s post_processor"), name.c_str(), where), "ids", where);
    parts.push_back({-1, ids.get<std::vector<int64_t>>(), special.value("type_id", int64_t{0})});
  }
  return parts;
}

// BertProcessing's and RobertaProcessing's "cls": ["[CLS]", 101]
int64_t token_id(const nlohmann::json& p, const char* key, const std::string& where) {
  const auto& pair = field(p, key, where + "'s post_processor");
  if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number_integer())
    throw Error(fmt::format("tokenizer: {}: post_processor.{} must be [token, id], got {}", where, key, pair.dump()));
  return pair[1].get<int64_t>();
}

// One processor that adds tokens: its single text's surround and its pair template
void take(PostProcessor& out, std::vector<TemplatePart> single, std::vector<TemplatePart> pair, const std::string& kind) {
  const bool adds_before = !out.single.prefix.empty() || !out.single.suffix.empty();
  std::vector<int64_t> prefix, suffix;
  bool after = false;
  for (auto& part : single) {
    if (part.text >= 0) after = true;
    else (after ? suffix : prefix).insert((after ? suffix : prefix).end(), part.ids.begin(), part.ids.end());
  }
  // a later processor surrounds what the earlier ones made
  out.single.prefix.insert(out.single.prefix.begin(), prefix.begin(), prefix.end());
  out.single.suffix.insert(out.single.suffix.end(), suffix.begin(), suffix.end());
  if (adds_before) out.pair_refusal = fmt::format("a Sequence of post-processors that each add tokens (then {})", kind);
  out.pair = std::move(pair);
}

void add(const nlohmann::json& p, const std::string& where, PostProcessor& out) {
  if (p.is_null()) return;
  const std::string kind = p.is_object() ? p.value("type", "") : "";
  if (kind == "ByteLevel") return;
  if (kind == "Sequence") {
    for (auto& each : field(p, "processors", where + "'s post_processor")) add(each, where, out);
    return;
  }
  if (kind == "TemplateProcessing")
    return take(out, read_template(p, "single", where), read_template(p, "pair", where), kind);
  if (kind == "BertProcessing" || kind == "RobertaProcessing") {
    const int64_t cls = token_id(p, "cls", where), sep = token_id(p, "sep", where);
    std::vector<TemplatePart> single{{-1, {cls}, 0}, {0, {}, 0}, {-1, {sep}, 0}};
    // [CLS] A [SEP] B [SEP], B's part of type 1; <s> A </s> </s> B </s>, every part of type 0
    const int64_t second = kind == "BertProcessing" ? 1 : 0;
    std::vector<TemplatePart> pair = single;
    if (kind == "RobertaProcessing") pair.push_back({-1, {sep}, second});
    pair.push_back({1, {}, second});
    pair.push_back({-1, {sep}, second});
    return take(out, std::move(single), std::move(pair), kind);
  }
  throw Error(fmt::format("tokenizer: {}: post_processor {} is not read yet (read: TemplateProcessing, BertProcessing, "
                          "RobertaProcessing, ByteLevel, Sequence)", where, kind.empty() ? p.dump().substr(0, 80) : kind));
}

}  // namespace

IdsAndTypes PostProcessor::apply_pair(const std::vector<int64_t>& first, const std::vector<int64_t>& second) const {
  if (!pair_refusal.empty())
    throw Error(fmt::format("tokenizer: a pair of texts is not encoded through {}", pair_refusal));
  IdsAndTypes out;
  for (auto& part : pair) {
    const auto& ids = part.text < 0 ? part.ids : part.text == 0 ? first : second;
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.type_ids.insert(out.type_ids.end(), ids.size(), part.type_id);
  }
  return out;
}

PostProcessor read_post_processor(const nlohmann::json& spec, const std::string& where) {
  PostProcessor out;
  add(spec, where, out);
  return out;
}

}  // namespace slapo::text

// tokenizer.json's Replace stage.
#include "text/replace_stage.h"

#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "text/json_fields.h"

namespace slapo::text {

std::string Replacement::apply(std::string text) const {
  if (regex) {
    std::string out;
    size_t at = 0;
    bool matched = false;
    regex->for_each_match(text.data(), text.size(), [&](size_t begin, size_t end) {
      out.append(text, at, begin - at);
      out += to;
      at = end;
      matched = true;
    });
    if (!matched) return text;
    out.append(text, at, std::string::npos);
    return out;
  }
  if (text.find(from) == std::string::npos) return text;
  if (to.size() <= from.size()) {  // in place, one pass: "▁" -> " " shortens the text
    size_t write = 0, read = 0;
    for (size_t hit; (hit = text.find(from, read)) != std::string::npos; read = hit + from.size()) {
      std::memmove(&text[write], text.data() + read, hit - read);
      write += hit - read;
      std::memcpy(&text[write], to.data(), to.size());
      write += to.size();
    }
    std::memmove(&text[write], text.data() + read, text.size() - read);
    text.resize(write + text.size() - read);
    return text;
  }
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = text.find(from, at)) != std::string::npos; at = hit + from.size()) {
    out.append(text, at, hit - at);
    out += to;
  }
  out.append(text, at, std::string::npos);
  return out;
}

Replacement read_replace(const nlohmann::json& spec, const std::string& where, const char* stage) {
  const std::string what = fmt::format("{}'s Replace {}", where, stage);
  const auto& pattern = field(spec, "pattern", what);
  const std::string content = field(spec, "content", what).get<std::string>();
  if (pattern.contains("Regex"))
    return {"", content,
            std::make_shared<const Regex>(pcre2_from_oniguruma(pattern["Regex"].get<std::string>(), where),
                                          what + "'s pattern")};
  if (!pattern.contains("String"))
    throw Error(fmt::format("tokenizer: {}: a Replace {}'s pattern is a String or a Regex, got {}", where, stage,
                            pattern.dump().substr(0, 80)));
  Replacement r{pattern["String"].get<std::string>(), content, nullptr};
  if (r.from.empty()) throw Error(fmt::format("tokenizer: {}: a Replace {}'s pattern is empty", where, stage));
  return r;
}

}  // namespace slapo::text

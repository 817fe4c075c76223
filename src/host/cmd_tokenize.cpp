// slapo-lua tokenize: a corpus (plain text files, one document each; JSON-lines files, one
// document a line) through a checkpoint's tokenizer into one token file (text/token_file.h), with a
// progress line (bytes, rate, ETA) while it works.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "host/commands.h"
#include "text/tokenizer.h"
#include "text/token_file.h"

namespace slapo {

namespace {

bool is_json_lines(const std::string& path) {
  auto ext = std::filesystem::path(path).extension().string();
  return ext == ".jsonl" || ext == ".ndjson";
}

// "12.3 of 45.0 MB, 3.4 MB/s, 10 s left, 1,234 documents", rewritten in place on a terminal and
// every 10 seconds otherwise.
class Progress {
 public:
  explicit Progress(double total_bytes) : total_(total_bytes), terminal_(::isatty(STDERR_FILENO)) {}
  void update(double done, uint64_t documents, bool last = false) {
    auto now = std::chrono::steady_clock::now();
    double since_shown = std::chrono::duration<double>(now - shown_).count();
    if (!last && since_shown < (terminal_ ? 0.2 : 10.0)) return;
    shown_ = now;
    double elapsed = std::chrono::duration<double>(now - start_).count();
    double rate = elapsed > 0 ? done / elapsed : 0;
    std::string line = fmt::format("tokenize: {:.1f} of {:.1f} MB, {:.2f} MB/s, {} documents", done / 1e6,
                                   total_ / 1e6, rate / 1e6, documents);
    if (!last && rate > 0) line += fmt::format(", {:.0f} s left", (total_ - done) / rate);
    if (last) line += fmt::format(", in {:.1f} s", elapsed);
    fmt::print(stderr, terminal_ ? "\r{}\x1b[K{}" : "{}{}", line, last || !terminal_ ? "\n" : "");
    std::fflush(stderr);
  }

 private:
  double total_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), shown_ = start_;
};

}  // namespace

int cmd_tokenize(const TokenizeArgs& a) {
  try {
    auto tokenizer = text::open_tokenizer(a.tokenizer);
    double total = 0;
    for (auto& file : a.inputs) {
      if (!std::filesystem::is_regular_file(file)) throw Error(fmt::format("tokenize: {} is not a file", file));
      total += static_cast<double>(std::filesystem::file_size(file));
    }
    const auto eos = tokenizer->eos_id();
    text::TokenFileWriter out(a.out, static_cast<uint32_t>(tokenizer->vocab_size()));
    Progress progress(total);
    double done = 0;
    auto add = [&](const std::string& text, const std::string& where) {
      auto ids = tokenizer->encode(text);
      if (eos && !a.no_eos) ids.push_back(*eos);  // documents end with the end-of-text token
      out.add(ids, where);
    };
    for (auto& file : a.inputs) {
      std::ifstream in(file, std::ios::binary);
      if (!in) throw Error(fmt::format("tokenize: cannot open {}", file));
      if (!is_json_lines(file)) {  // a plain text file: one document
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        add(text, file);
        done += static_cast<double>(text.size());
        progress.update(done, out.documents());
        continue;
      }
      std::string line;
      for (int number = 1; std::getline(in, line); ++number) {
        done += static_cast<double>(line.size() + 1);
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines are no documents
        const std::string where = fmt::format("{}:{}", file, number);
        nlohmann::json record;
        try {
          record = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception& e) {
          throw Error(fmt::format("tokenize: {}: the line is not JSON ({})", where, e.what()));
        }
        if (!record.is_object() || !record.contains(a.field) || !record[a.field].is_string())
          throw Error(fmt::format("tokenize: {}: the record has no string field \"{}\" (--field names it)", where,
                                  a.field));
        add(record[a.field].get<std::string>(), where);
        progress.update(done, out.documents());
      }
    }
    out.finish();
    progress.update(done, out.documents(), /*last=*/true);
    fmt::print("wrote {}: {} tokens in {} documents (vocabulary {})\n", a.out, out.tokens(), out.documents(),
               tokenizer->vocab_size());
  } catch (const std::exception& e) {
    report_error(e.what());
    return 1;
  }
  return 0;
}

}  // namespace slapo

// doctest entry point. <torch/torch.h> comes first: glog's CHECK must not replace doctest's.
//
// Beside doctest's own report, a listener holds every case to the suite's rules and prints the
// line scripts/test reads, "N passed, N failed, N skipped":
// - a case that made no assertion fails (a test that returns early has checked nothing);
// - a case decorated `* doctest::skip() * doctest::description("no GPU")` is skipped with that
//   reason; cases left out by a command-line filter are not counted at all.
#include <torch/torch.h>
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

struct Tally {
  int passed = 0, failed = 0, skipped = 0;
};
Tally tally;

struct SuiteRules : doctest::IReporter {
  explicit SuiteRules(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& tc) override { current_ = &tc; }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats& st) override {
    if (!st.testCaseSuccess) {
      tally.failed++;
    } else if (st.numAssertsCurrentTest == 0) {
      tally.failed++;
      std::printf("FAIL %s: the case checked nothing (no assertion ran)\n", current_ ? current_->m_name : "?");
    } else {
      tally.passed++;
    }
  }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData& tc) override {
    if (!tc.m_skip) return;  // filtered out on the command line
    tally.skipped++;
    std::printf("skip %s: %s\n", tc.m_name, tc.m_description ? tc.m_description : "no reason given");
  }

 private:
  const doctest::TestCaseData* current_ = nullptr;
};

}  // namespace

REGISTER_LISTENER("suite_rules", 1, SuiteRules);

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  int rc = context.run();
  if (context.shouldExit()) return rc;
  std::printf("%d passed, %d failed, %d skipped\n", tally.passed, tally.failed, tally.skipped);
  return rc != 0 || tally.failed > 0 ? 1 : 0;
}

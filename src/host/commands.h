// The subcommands of slapo-lua; each returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace slapo {

int cmd_run(const std::string& script, const std::vector<std::string>& args);
int cmd_test(const std::vector<std::string>& paths);
int cmd_inspect(const std::string& model);

/// Prints a failure of a script ("slapo-lua: <message with traceback>") to stderr.
void report_error(const std::string& message);

}  // namespace slapo

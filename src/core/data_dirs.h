// Where the program finds the files it ships with: the Lua stdlib and the device profiles.
// An installed copy finds them beside its executable, a build tree in the checkout it came from.
#pragma once

#include <string>

namespace slapo {

/// The Lua standard library: $SLAPO_STDLIB, else an installed copy's
/// (<prefix>/share/slapo-lua/stdlib beside <prefix>/bin), else the checkout's stdlib/.
std::string stdlib_dir();

/// Named device profiles (h100.json, ...): $SLAPO_DEVICES, else devices/ inside stdlib_dir(),
/// so an installed copy, a build tree and $SLAPO_STDLIB each carry their own.
std::string devices_dir();

/// A module the program opens at run time (libslapo_sentencepiece.so): beside the executable in a
/// build tree, in <prefix>/lib/slapo-lua for an installed copy; "" when neither holds it.
std::string module_path(const std::string& file);

/// The program as the user invoked it ("build/slapo-lua", "slapo-lua"), for the commands it
/// suggests: main sets it from argv[0]; "slapo-lua" until then, or when started as /proc/self/exe.
const std::string& program_name();
void set_program_name(const std::string& argv0);

}  // namespace slapo

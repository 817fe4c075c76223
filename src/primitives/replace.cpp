// replace: swap a module for another with the same call signature.
#include "core/error.h"
#include "primitives/primitives.h"

namespace slapo {

void replace(Schedule& sch, std::shared_ptr<Module> new_mod, const CallSite& site) {
  // Step 1. Checks.
  auto parent = sch.parent();
  if (!parent)
    throw Error("replace: cannot replace the root module; create a schedule over the new model instead");
  if (!new_mod) throw Error(fmt::format("replace: the new module for '{}' is empty", sch.path()));
  for (auto node = sch.shared_from_this(); node; node = node->parent())
    if (node->mod() == new_mod)
      throw Error(fmt::format("replace: cannot put {} ('{}', a {}) inside itself at '{}'",
                              node == sch.shared_from_this() ? "the module" : "an ancestor", node->path(),
                              new_mod->type_name(), sch.path()));
  // Step 2. Rewire the parent's slot, then this node and its subtree.
  parent->mod()->set_child(sch.name(), new_mod);
  sch.rebind_module(new_mod);
  // Step 3. Log.
  sch.log().append({"replace", sch.path(), site.lua_args, site.source});
}

}  // namespace slapo

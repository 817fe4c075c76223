// replace: swap a module for another with the same call signature.
#include "core/error.h"
#include "primitives/primitives.h"

namespace slapo {

namespace {

// A replacement that takes over the old module's own parameters (the same tensors, under any
// name) takes over what the schedule recorded about them: shard specs and annotations.
void carry_parameter_meta(Module& from, Module& to) {
  auto& old_meta = from.meta();
  if (old_meta.shards.empty() && old_meta.annotations.empty()) return;
  for (auto& old_item : from.named_parameters(/*recurse=*/false)) {
    const std::string& old_name = old_item.key();
    for (auto& new_item : to.named_parameters(/*recurse=*/false)) {
      const std::string& new_name = new_item.key();
      if (new_item.value().unsafeGetTensorImpl() != old_item.value().unsafeGetTensorImpl()) continue;
      auto spec = old_meta.shards.find(old_name);
      if (spec != old_meta.shards.end() && !to.meta().shards.count(new_name)) to.meta().shards[new_name] = spec->second;
      auto notes = old_meta.annotations.find(old_name);
      if (notes != old_meta.annotations.end() && !to.meta().annotations.count(new_name))
        to.meta().annotations[new_name] = notes->second;
    }
  }
}

}  // namespace

void replace(Schedule& sch, std::shared_ptr<Module> new_mod, const CallSite& site) {
  // Step 1. Checks.
  auto parent = sch.parent();
  if (!parent)
    throw Error("replace: cannot replace the root module; create a schedule over the new model instead");
  if (!new_mod) throw Error(fmt::format("replace: the new module for '{}' is empty", sch.path()));
  // The new module may not be this module or an ancestor, nor hold one: the tree would contain
  // itself. Named: the ancestor it is, else the highest one it holds.
  std::shared_ptr<Schedule> held;
  for (auto node = sch.shared_from_this(); node; node = node->parent()) {
    if (node->mod() == new_mod)
      throw Error(fmt::format("replace: cannot put {} ('{}', a {}) inside itself at '{}'",
                              node == sch.shared_from_this() ? "the module" : "an ancestor",
                              node->path().empty() ? "the root" : node->path(), new_mod->type_name(), sch.path()));
    if (node != sch.shared_from_this() && new_mod->contains(node->mod().get())) held = node;
  }
  if (held)
    throw Error(fmt::format("replace: cannot put an ancestor ('{}', a {}) inside itself at '{}': the new {} contains it",
                            held->path().empty() ? "the root" : held->path(), held->mod()->type_name(), sch.path(),
                            new_mod->type_name()));
  // Step 2. Rewire the parent's slot, then this node and its subtree.
  carry_parameter_meta(*sch.mod(), *new_mod);
  parent->mod()->set_child(sch.name(), new_mod);
  sch.rebind_module(new_mod);
  // Step 3. Log.
  sch.log().append({"replace", sch.path(), site.lua_args, site.source});
}

}  // namespace slapo

// Reading each rank's slices of a checkpoint into a meta-device model.
#include "primitives/pretrained_slices.h"

#include <functional>
#include <unordered_map>

#include "core/error.h"
#include "graph/traced_graph.h"
#include "io/checkpoint_reader.h"
#include "dist/split_tensors.h"

namespace slapo {

int read_pretrained_slices(const std::shared_ptr<Module>& root) {
  std::vector<std::pair<std::string, Module*>> mods;
  std::function<void(Module&, const std::string&)> visit = [&](Module& m, const std::string& path) {
    mods.emplace_back(path, &m);
    for (auto& [name, child] : m.children_in_order()) visit(*child, path.empty() ? name : path + "." + name);
  };
  visit(*root, "");
  const auto splits = splits_by_tensor(*root);
  std::unordered_map<const c10::TensorImpl*, at::Tensor> fresh;  // meta tensor -> its values (ties once)
  int read = 0;
  torch::NoGradGuard no_grad;
  for (auto& [path, m] : mods) {
    for (auto& [name, source] : m->meta().sources) {
      if (!m->has_param(name)) continue;  // a primitive removed it
      at::Tensor meta = m->param(name);
      if (!meta.defined() || !meta.device().is_meta()) continue;
      auto& values = fresh[meta.unsafeGetTensorImpl()];
      if (!values.defined()) {
        auto kept = splits.find(meta.unsafeGetTensorImpl());  // by tensor: a tie is split under every name
        at::Tensor part = local_part(kept == splits.end() ? Splits{} : kept->second, source.reader->view(source.key));
        if (part.sizes() != meta.sizes())
          throw Error(fmt::format("build: '{}{}' is [{}] but its slice of '{}' in '{}' is [{}]", path.empty() ? "" : path + ".",
                                  name, fmt::join(meta.sizes(), ", "), source.key, source.reader->dir(),
                                  fmt::join(part.sizes(), ", ")));
        values = torch::empty(meta.sizes(), meta.options().device(at::kCPU).requires_grad(false));
        values.copy_(part);
        source.reader->release(source.key);  // what was read stops counting as resident memory
        values.requires_grad_(meta.requires_grad());
        ++read;
      }
      m->set_param(name, values);
    }
    m->meta().sources.clear();
  }
  for (auto& [path, m] : mods)
    if (m->meta().graph) m->meta().graph->swap_params(fresh);
  return read;
}

}  // namespace slapo

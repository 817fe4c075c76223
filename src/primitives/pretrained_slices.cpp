// Reading each rank's slices of a checkpoint into a meta-device model.
#include "primitives/pretrained_slices.h"

#include <functional>
#include <unordered_map>

#include "core/error.h"
#include "distributed/split_tensors.h"
#include "graph/traced_graph.h"
#include "io/checkpoint_reader.h"

namespace slapo {

namespace {

// Every module below `root` with its path, parents first.
std::vector<std::pair<std::string, Module*>> modules_of(Module& root) {
  std::vector<std::pair<std::string, Module*>> mods;
  std::function<void(Module&, const std::string&)> visit = [&](Module& m, const std::string& path) {
    mods.emplace_back(path, &m);
    for (auto& [name, child] : m.children_in_order()) visit(*child, path.empty() ? name : path + "." + name);
  };
  visit(root, "");
  return mods;
}

// This rank's part of a parameter's checkpoint tensor, as a new CPU tensor of its dtype.
at::Tensor read_part(const std::string& path, const std::string& name, const at::Tensor& param,
                     const ParamSource& source, const std::unordered_map<c10::TensorImpl*, Splits>& splits) {
  auto kept = splits.find(param.unsafeGetTensorImpl());  // by tensor: a tie is split under every name
  at::Tensor part = local_part(kept == splits.end() ? Splits{} : kept->second, source.reader->view(source.key));
  if (part.sizes() != param.sizes())
    throw Error(fmt::format("build: '{}{}' is [{}] but its slice of '{}' in '{}' is [{}]", path.empty() ? "" : path + ".",
                            name, fmt::join(param.sizes(), ", "), source.key, source.reader->dir(),
                            fmt::join(part.sizes(), ", ")));
  at::Tensor values = torch::empty(param.sizes(), param.options().device(at::kCPU).requires_grad(false));
  values.copy_(part);
  source.reader->release(source.key);  // what was read stops counting as resident memory
  return values;
}

// A tensor of `meta`'s shape and dtype on the CPU that holds one zero for every element (strides
// of 0): a parameter's stand-in until its values are read. Not a view, so it can take them later
// in place (set_data) and stay the tensor the modules, graphs and optimizer hold.
at::Tensor placeholder_of(const at::Tensor& meta) {
  at::Tensor zero = at::zeros({1}, meta.options().device(at::kCPU).requires_grad(false));
  at::Tensor out = at::empty({0}, zero.options());
  out.set_(zero.storage(), 0, meta.sizes(), std::vector<int64_t>(meta.dim(), 0));
  return out;
}

}  // namespace

int read_pretrained_slices(const std::shared_ptr<Module>& root, bool defer) {
  auto mods = modules_of(*root);
  const auto splits = splits_by_tensor(*root);
  std::unordered_map<const c10::TensorImpl*, at::Tensor> fresh;  // meta tensor -> its values (ties once)
  int read = 0;
  torch::NoGradGuard no_grad;
  for (auto& [path, m] : mods) {
    for (auto it = m->meta().sources.begin(); it != m->meta().sources.end();) {
      auto& [name, source] = *it;
      at::Tensor meta = m->has_param(name) ? m->param(name) : at::Tensor();  // a primitive may have removed it
      if (!meta.defined() || !meta.device().is_meta()) {
        it = m->meta().sources.erase(it);
        continue;
      }
      auto& values = fresh[meta.unsafeGetTensorImpl()];
      if (!values.defined()) {
        values = defer ? placeholder_of(meta) : read_part(path, name, meta, source, splits);
        values.requires_grad_(meta.requires_grad());
        read += defer ? 0 : 1;
      }
      m->set_param(name, values);
      it = defer ? std::next(it) : m->meta().sources.erase(it);  // a placeholder keeps its source
    }
  }
  for (auto& [path, m] : mods)
    if (m->meta().graph) m->meta().graph->swap_params(fresh);
  return read;
}

int read_deferred_slices(Module& root, const std::unordered_set<const c10::TensorImpl*>& wanted) {
  const auto splits = splits_by_tensor(root);
  std::unordered_set<const c10::TensorImpl*> done;  // ties once
  int read = 0;
  torch::NoGradGuard no_grad;
  for (auto& [path, m] : modules_of(root)) {
    for (auto& [name, source] : m->meta().sources) {
      if (!m->has_param(name)) continue;
      at::Tensor placeholder = m->param(name);
      const auto* impl = placeholder.unsafeGetTensorImpl();
      if (!wanted.count(impl) || !done.insert(impl).second) continue;
      placeholder.set_data(read_part(path, name, placeholder, source, splits));
      ++read;
    }
    m->meta().sources.clear();
  }
  return read;
}

}  // namespace slapo

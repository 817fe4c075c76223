// TorchScript modules wrapped in the common module interface.
#include "io/torchscript.h"

#include <torch/script.h>

#include <filesystem>

#include "core/error.h"

namespace slapo {

namespace {

// "__torch__.torch.nn.modules.linear.___torch_mangle_0.Linear" -> "Linear"
std::string short_type_name(const torch::jit::Module& m) {
  auto name = m.type()->name();
  if (!name) return "ScriptModule";
  std::string q = name->name();
  return q.empty() ? "ScriptModule" : q;
}

// The script object runs forward itself (children calls happen inside TorchScript), so the
// wrappers mirror its tree for naming, parameters and inspection.
class ScriptModule : public ModuleBase<ScriptModule> {
 public:
  explicit ScriptModule(torch::jit::Module m) : ModuleBase(short_type_name(m)), script_(std::move(m)) {
    for (const auto& p : script_.named_parameters(/*recurse=*/false)) set_param(p.name, p.value);
    for (const auto& b : script_.named_buffers(/*recurse=*/false)) register_buffer(b.name, b.value);
    for (const auto& c : script_.named_children()) set_child(c.name, std::make_shared<ScriptModule>(c.value));
  }
  std::string describe() const override { return "TorchScript"; }

 protected:
  Value forward(Values args) override {
    script_.train(is_training());
    return script_.forward(std::move(args));
  }
  std::shared_ptr<Module> deep_clone_impl(std::unordered_map<c10::TensorImpl*, at::Tensor>&) const override {
    return std::make_shared<ScriptModule>(script_.deepcopy());
  }

 private:
  mutable torch::jit::Module script_;
};

}  // namespace

std::shared_ptr<Module> load_torchscript(const std::string& path) {
  if (!std::filesystem::exists(path)) throw Error(fmt::format("load: no file '{}'", path));
  if (std::filesystem::is_directory(path))
    throw Error(fmt::format("load: '{}' is a directory; load reads one TorchScript file (a Hugging Face checkpoint "
                            "folder loads with slapo.from_pretrained)", path));
  torch::jit::Module m;
  try {
    m = torch::jit::load(path);
  } catch (const c10::Error& e) {
    throw Error(fmt::format("load: '{}' is not a TorchScript module: {}", path, e.what_without_backtrace()));
  }
  return std::make_shared<ScriptModule>(std::move(m));
}

}  // namespace slapo

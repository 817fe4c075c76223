// checkpoint: keep only a module's inputs in forward and recompute it in backward, with the
// random-number states of the first run restored (dropout masks repeat bit for bit).
#include <unordered_set>

#include "core/error.h"
#include "primitives/primitives.h"
#include "primitives/rng.h"

namespace slapo {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What backward needs to run the module again.
struct Recompute : torch::CustomClassHolder {
  std::shared_ptr<Module> module;
  std::function<Value(Values)> run;  // the module's call without the checkpoint wrapper
  Values args;                       // the call's arguments; tensors are swapped in at tensor_slots
  std::vector<size_t> tensor_slots;
  std::vector<bool> input_requires_grad;
  std::vector<at::Tensor> params;
  bool tuple_output = false;
  RngSnapshot rng;
  std::string where;

  Values with_inputs(const std::vector<at::Tensor>& inputs) const {
    Values a = args;
    for (size_t i = 0; i < tensor_slots.size(); ++i) a[tensor_slots[i]] = inputs[i];
    return a;
  }

  std::vector<at::Tensor> tensors_of(const Value& out) {
    if (out.isTensor()) return {out.toTensor()};
    if (out.isTuple()) {
      tuple_output = true;
      std::vector<at::Tensor> ts;
      for (auto& e : out.toTupleRef().elements()) {
        if (!e.isTensor())
          throw Error(fmt::format("checkpoint: {} returned a tuple holding a {}; a checkpointed module returns tensors",
                                  where, e.tagKind()));
        ts.push_back(e.toTensor());
      }
      return ts;
    }
    throw Error(fmt::format("checkpoint: {} returned a {}; a checkpointed module returns tensors", where, out.tagKind()));
  }
};

struct CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
  // `tensors`: the module's tensor inputs, then its parameters (so autograd routes their grads here).
  static variable_list forward(AutogradContext* ctx, at::TensorList tensors, c10::intrusive_ptr<Recompute> r) {
    size_t n = r->tensor_slots.size();
    std::vector<at::Tensor> inputs(tensors.begin(), tensors.begin() + static_cast<int64_t>(n));
    r->rng = RngSnapshot::capture(*r->module);
    Value out;
    {
      torch::NoGradGuard no_grad;
      out = r->run(r->with_inputs(inputs));
    }
    ctx->save_for_backward(inputs);
    ctx->saved_data["recompute"] = c10::IValue::make_capsule(r);
    return r->tensors_of(out);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto r = c10::static_intrusive_pointer_cast<Recompute>(ctx->saved_data["recompute"].toCapsule());
    auto saved = ctx->get_saved_variables();
    std::vector<at::Tensor> inputs;
    for (size_t i = 0; i < saved.size(); ++i) inputs.push_back(saved[i].detach().requires_grad_(r->input_requires_grad[i]));

    // Replay the first run's random numbers; afterwards put back the ones of now.
    auto now = RngSnapshot::capture(*r->module);
    r->rng.restore();
    std::vector<at::Tensor> outs;
    {
      torch::AutoGradMode grad_mode(true);
      outs = r->tensors_of(r->run(r->with_inputs(inputs)));
    }
    now.restore();

    std::vector<at::Tensor> wrt, roots, root_grads;
    for (auto& t : inputs)
      if (t.requires_grad()) wrt.push_back(t);
    for (auto& p : r->params) wrt.push_back(p);
    for (size_t i = 0; i < outs.size() && i < grad_outputs.size(); ++i)
      if (grad_outputs[i].defined() && outs[i].requires_grad()) roots.push_back(outs[i]), root_grads.push_back(grad_outputs[i]);
    variable_list grads;
    if (!roots.empty() && !wrt.empty())
      grads = torch::autograd::grad(roots, wrt, root_grads, /*retain_graph=*/false, /*create_graph=*/false,
                                    /*allow_unused=*/true);

    variable_list result;
    size_t k = 0;
    for (auto& t : inputs) result.push_back(t.requires_grad() && k < grads.size() ? grads[k++] : at::Tensor());
    for (size_t i = 0; i < r->params.size(); ++i) result.push_back(k < grads.size() ? grads[k++] : at::Tensor());
    result.push_back(at::Tensor());  // the Recompute argument
    return result;
  }
};

// The call wrapper `checkpoint` installs on a module.
Value checkpointed_call(Module& m, Values args, const std::function<Value(Values)>& run, const std::string& where) {
  if (!torch::GradMode::is_enabled()) return run(std::move(args));  // nothing to save in no-grad runs
  auto r = c10::make_intrusive<Recompute>();
  r->module = std::dynamic_pointer_cast<Module>(m.shared_from_this());
  r->run = run;
  r->where = where;
  std::vector<at::Tensor> tensors;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].isTensor()) continue;
    r->tensor_slots.push_back(i);
    r->input_requires_grad.push_back(args[i].toTensor().requires_grad());
    tensors.push_back(args[i].toTensor());
  }
  std::unordered_set<c10::TensorImpl*> seen;
  auto add_param = [&](const at::Tensor& p) {
    if (p.requires_grad() && seen.insert(p.unsafeGetTensorImpl()).second) r->params.push_back(p);
  };
  for (auto& p : unique_named_parameters(m)) add_param(p.second);
  for (auto& p : m.borrowed_parameters()) add_param(p);  // a checkpointed subgraph's leaves
  tensors.insert(tensors.end(), r->params.begin(), r->params.end());
  r->args = std::move(args);
  auto outs = CheckpointFunction::apply(at::TensorList(tensors), r);
  if (!r->tuple_output) return outs.at(0);
  return c10::ivalue::Tuple::create(std::vector<Value>(outs.begin(), outs.end()));
}

}  // namespace

void make_checkpointed(Module& m, const std::string& where) {
  m.set_call_wrapper([where](Module& self, Values args, const std::function<Value(Values)>& run) {
    return checkpointed_call(self, std::move(args), run, where);
  });
  m.meta().checkpointed = true;
}

void checkpoint(Schedule& sch, const CallSite& site) {
  Module& m = *sch.mod();
  if (m.meta().checkpointed)
    throw Error(fmt::format("checkpoint: {} ({}) is already checkpointed", sch.where(), m.type_name()));
  if (!sch.parent())
    throw Error("checkpoint: the root module cannot be checkpointed (nothing outside it would hold its inputs); "
                "checkpoint its layers instead");
  make_checkpointed(m, sch.where());
  sch.log().append({"checkpoint", sch.path(), site.lua_args, site.source});
}

}  // namespace slapo

// fuse(compiler = "kernels"): the traced patterns that map onto the fused ops of kernels.h.
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/subgraph_matcher.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/subgraph_rewrite.h>
#include <torch/library.h>

#include "core/error.h"
#include "graph/traced_graph.h"
#include "models/layers.h"

namespace slapo {

namespace {

using Vars = std::unordered_map<std::string, torch::jit::Value*>;

// A Dropout leaf's p and train/eval state, read when the graph runs: a fused LayerNorm tail
// follows model:train() / model:eval() as the leaf it replaced did.
std::tuple<double, bool> leaf_dropout(int64_t id) {
  std::string path;
  auto leaf = leaf_module(id, &path);
  if (!leaf) throw Error(fmt::format("fused LayerNorm tail: its dropout leaf '{}' no longer exists", path));
  auto* dropout = dynamic_cast<Dropout*>(leaf.get());
  if (!dropout)
    throw Error(fmt::format("fused LayerNorm tail: leaf '{}' was a Dropout when fuse rewrote the graph; it is now {}; "
                            "trace and fuse again after replacing it",
                            path, leaf->type_name()));
  return {dropout->p, dropout->is_training()};
}

TORCH_LIBRARY_FRAGMENT(slapo, m) {
  // CONSERVATIVE: the result changes with the module's state, so constant propagation must not
  // fold it into the graph.
  m.def(torch::schema("leaf_dropout(int id) -> (float, bool)", c10::AliasAnalysisKind::CONSERVATIVE),
        TORCH_FN(leaf_dropout));
}

c10::TensorTypePtr tensor_type(const torch::jit::Match& match, const Vars& vars, const char* name) {
  return match.values_map.at(vars.at(name))->type()->cast<c10::TensorType>();
}

bool is_int_constant(const torch::jit::Match& match, const Vars& vars, const char* name, int64_t value) {
  auto v = torch::jit::toIValue(match.values_map.at(vars.at(name)));
  return v && v->isInt() && v->toInt() == value;
}

// bias_gelu adds a vector along the last dimension, with alpha 1.
bool is_bias_gelu(const torch::jit::Match& match, const Vars& vars) {
  if (!is_int_constant(match, vars, "alpha", 1)) return false;
  bool after_matmul = vars.count("m") > 0;  // a decomposed Linear's bias, by construction
  auto x = tensor_type(match, vars, after_matmul ? "m" : "x");
  auto b = tensor_type(match, vars, "b");
  auto xs = x ? x->sizes().concrete_sizes() : c10::nullopt;
  auto bs = b ? b->sizes().concrete_sizes() : c10::nullopt;
  if (!xs || !bs) return after_matmul;
  return bs->size() == 1 && !xs->empty() && xs->back() == bs->front();
}

// alpha 1, the last dim, float32/64 scores and mask, a softmax in the scores' own dtype.
bool is_masked_softmax(const torch::jit::Match& match, const Vars& vars) {
  auto dim = torch::jit::toIValue(match.values_map.at(vars.at("dim")));
  auto dtype = torch::jit::toIValue(match.values_map.at(vars.at("dtype")));
  auto x = tensor_type(match, vars, "x");
  auto mask = tensor_type(match, vars, "mask");
  if (!is_int_constant(match, vars, "alpha", 1) || !dim || !dim->isInt() || !x || !mask) return false;
  auto rank = x->dim();
  auto type = x->scalarType();
  if (!rank || !type || (*type != at::kFloat && *type != at::kDouble) || mask->scalarType() != type) return false;
  if (dim->toInt() != -1 && dim->toInt() != static_cast<int64_t>(*rank) - 1) return false;
  return dtype && (dtype->isNone() || (dtype->isInt() && dtype->toInt() == static_cast<int64_t>(*type)));
}

// The kernel's contract: the call is a Dropout leaf, both adds have alpha 1, the bias, LayerNorm
// weight and bias are vectors as long as the rows (so LayerNorm normalises the last dim only),
// the residual has the activation's shape, all float32/64 of one dtype.
bool is_layer_norm_tail(const torch::jit::Match& match, const Vars& vars) {
  auto id = torch::jit::toIValue(match.values_map.at(vars.at("id")));
  if (!id || !id->isInt() || !dynamic_cast<Dropout*>(leaf_module(id->toInt()).get())) return false;
  if (!is_int_constant(match, vars, "alpha", 1) || !is_int_constant(match, vars, "alpha2", 1)) return false;
  auto h = tensor_type(match, vars, "h");
  auto res = tensor_type(match, vars, "res");
  if (!h || !res) return false;
  auto hs = h->sizes().concrete_sizes();
  auto type = h->scalarType();
  if (!hs || hs->empty() || res->sizes().concrete_sizes() != hs || !type || (*type != at::kFloat && *type != at::kDouble))
    return false;
  for (const char* name : {"b", "g", "beta"}) {
    auto v = tensor_type(match, vars, name);
    auto vs = v ? v->sizes().concrete_sizes() : c10::nullopt;
    if (!vs || vs->size() != 1 || vs->front() != hs->back() || v->scalarType() != type) return false;
  }
  return true;
}

// The ints a constant int list holds (a prim::Constant or a ListConstruct of constants).
c10::optional<std::vector<int64_t>> constant_ints(torch::jit::Value* v) {
  if (auto list = torch::jit::toIValue(v)) {
    if (list->isIntList()) return list->toIntVector();
    return c10::nullopt;
  }
  if (v->node()->kind() != c10::prim::ListConstruct) return c10::nullopt;
  std::vector<int64_t> out;
  for (auto* item : v->node()->inputs()) {
    auto i = torch::jit::toIValue(item);
    if (!i || !i->isInt()) return c10::nullopt;
    out.push_back(i->toInt());
  }
  return out;
}

bool is_float_or_double(const c10::TensorTypePtr& t) {
  auto type = t ? t->scalarType() : c10::nullopt;
  return type && (*type == at::kFloat || *type == at::kDouble);
}

// silu(gate) * up with one shape and dtype (no broadcast: the kernel is elementwise).
bool is_swiglu(const torch::jit::Match& match, const Vars& vars) {
  auto gate = tensor_type(match, vars, "g");
  auto up = tensor_type(match, vars, "u");
  if (!is_float_or_double(gate) || !up || up->scalarType() != gate->scalarType()) return false;
  auto gs = gate->sizes().concrete_sizes();
  return gs && up->sizes().concrete_sizes() == gs;
}

// LlamaRMSNorm: x^2 averaged over the last dim (kept), + eps, rsqrt, times x, times a weight as
// long as the rows; the casts around it are no-ops (to x's own float32/64 dtype).
bool is_rms_norm(const torch::jit::Match& match, const Vars& vars) {
  auto x = tensor_type(match, vars, "x");
  auto w = tensor_type(match, vars, "w");
  if (!is_float_or_double(x) || !w || w->scalarType() != x->scalarType()) return false;
  auto xs = x->sizes().concrete_sizes();
  auto ws = w->sizes().concrete_sizes();
  if (!xs || xs->empty() || !ws || ws->size() != 1 || ws->front() != xs->back()) return false;
  auto two = torch::jit::toIValue(match.values_map.at(vars.at("two")));
  if (!two || !((two->isInt() && two->toInt() == 2) || (two->isDouble() && two->toDouble() == 2.0))) return false;
  auto dims = constant_ints(match.values_map.at(vars.at("dims")));
  auto rank = static_cast<int64_t>(xs->size());
  if (!dims || dims->size() != 1 || (dims->front() != -1 && dims->front() != rank - 1)) return false;
  auto keep = torch::jit::toIValue(match.values_map.at(vars.at("keep")));
  auto mean_dtype = torch::jit::toIValue(match.values_map.at(vars.at("mean_dtype")));
  auto eps = torch::jit::toIValue(match.values_map.at(vars.at("eps")));
  if (!keep || !keep->isBool() || !keep->toBool() || !mean_dtype || !mean_dtype->isNone() || !eps || !eps->isDouble() ||
      !is_int_constant(match, vars, "alpha", 1))
    return false;
  for (const char* cast : {"dt1", "dt2"}) {
    auto dt = torch::jit::toIValue(match.values_map.at(vars.at(cast)));
    if (!dt || !dt->isInt() || dt->toInt() != static_cast<int64_t>(*x->scalarType())) return false;
  }
  return true;
}

void register_swiglu(torch::jit::SubgraphRewriter& rewriter) {
  for (const char* mul : {"aten::mul(%a, %u)", "aten::mul(%u, %a)"})
    rewriter.RegisterRewritePattern(std::string("graph(%g, %u):\n  %a = aten::silu(%g)\n  %y = ") + mul +
                                        "\n  return (%y)",
                                    "graph(%g, %u):\n  %y = slapo::swiglu(%g, %u)\n  return (%y)");
}

// As Hugging Face's LlamaRMSNorm (and the zoo's) traces: computed in float32 between two casts,
// the weight on either side of the last mul.
void register_rms_norm(torch::jit::SubgraphRewriter& rewriter) {
  const std::string inputs =
      "graph(%x, %w, %two : int, %dims : int[], %keep : bool, %mean_dtype, %eps : float, %alpha : int, %dt1 : int, "
      "%nb1 : bool, %cp1 : bool, %mf1, %dt2 : int, %nb2 : bool, %cp2 : bool, %mf2):\n";
  const std::string body = "  %h = aten::to(%x, %dt1, %nb1, %cp1, %mf1)\n"
                           "  %sq = aten::pow(%h, %two)\n"
                           "  %var = aten::mean(%sq, %dims, %keep, %mean_dtype)\n"
                           "  %ve = aten::add(%var, %eps, %alpha)\n"
                           "  %r = aten::rsqrt(%ve)\n"
                           "  %n = aten::mul(%h, %r)\n"
                           "  %c = aten::to(%n, %dt2, %nb2, %cp2, %mf2)\n";
  for (const char* scale : {"aten::mul(%w, %c)", "aten::mul(%c, %w)"})
    rewriter.RegisterRewritePattern(inputs + body + "  %y = " + scale + "\n  return (%y)",
                                    inputs + "  %y = slapo::rms_norm(%x, %w, %eps)\n  return (%y)");
}

// bias add -> Dropout leaf -> residual add (either operand order) -> layer_norm, with the bias add
// after a matmul (a decomposed Linear) or, in a chosen subgraph, on its own.
void register_layer_norm_tails(torch::jit::SubgraphRewriter& rewriter, bool chosen) {
  const std::string head = chosen ? "" : "  %m = aten::matmul(%x, %w)\n";
  const std::string x = chosen ? "%x" : "%m";
  const std::string params = chosen ? "%x" : "%x, %w";
  for (const char* residual_add : {"aten::add(%d, %res, %alpha2)", "aten::add(%res, %d, %alpha2)"}) {
    std::string inputs = "graph(" + params +
                         ", %b, %alpha : int, %id : int, %res, %alpha2 : int, %shape : int[], %g, %beta, %eps : "
                         "float, %cudnn : bool):\n";
    std::string pattern = inputs + head + "  %h = aten::add(" + x + ", %b, %alpha)\n" +
                          "  %hs : Tensor[] = prim::ListConstruct(%h)\n" + "  %d = slapo::call_module(%id, %hs)\n" +
                          "  %r = " + residual_add + "\n" +
                          "  %y = aten::layer_norm(%r, %shape, %g, %beta, %eps, %cudnn)\n  return (%y)";
    std::string fused = inputs + head + "  %p : float, %t : bool = slapo::leaf_dropout(%id)\n" +
                        "  %y = slapo::bias_dropout_add_layer_norm(" + x + ", %b, %res, %g, %beta, %p, %t, %eps)\n" +
                        "  return (%y)";
    rewriter.RegisterRewritePattern(pattern, fused);
  }
}

}  // namespace

std::string kernel_patterns(bool chosen) {
  std::string common = "; scores / c + mask -> softmax; silu(gate) * up; x * rsqrt(mean(x^2) + eps) * weight";
  return chosen ? "a bias add -> gelu, the bias a vector as long as the last dimension" + common +
                      "; a bias add -> Dropout -> residual add -> layer_norm"
                : "matmul -> bias add -> gelu" + common + "; matmul -> bias add -> Dropout -> residual add -> layer_norm";
}

int TracedGraph::fuse_kernels(bool chosen) {
  auto count = [this] {
    int n = 0;
    for (auto* node : graph_->nodes()) {
      std::string kind = node->kind().toQualString();
      n += kind == "slapo::bias_gelu" || kind == "slapo::masked_softmax" ||
           kind == "slapo::bias_dropout_add_layer_norm" || kind == "slapo::rms_norm" || kind == "slapo::swiglu";
    }
    return n;
  };
  int before = count();
  // The LayerNorm tail first: its bias add must not be taken by a bias + GELU pattern (it is
  // followed by dropout, so it cannot be, but the order keeps each rewrite independent).
  torch::jit::SubgraphRewriter tail_rewriter;
  register_layer_norm_tails(tail_rewriter, chosen);
  tail_rewriter.runOnGraph(graph_, is_layer_norm_tail);

  torch::jit::SubgraphRewriter rms_norm_rewriter;
  register_rms_norm(rms_norm_rewriter);
  rms_norm_rewriter.runOnGraph(graph_, is_rms_norm);
  torch::jit::SubgraphRewriter swiglu_rewriter;
  register_swiglu(swiglu_rewriter);
  swiglu_rewriter.runOnGraph(graph_, is_swiglu);

  torch::jit::SubgraphRewriter gelu_rewriter;
  // The add's operand is the bias of a decomposed Linear/Conv1D: it follows a matmul directly.
  gelu_rewriter.RegisterRewritePattern(R"IR(
graph(%x, %w, %b, %alpha : int, %approx : str):
  %m = aten::matmul(%x, %w)
  %y = aten::add(%m, %b, %alpha)
  %z = aten::gelu(%y, %approx)
  return (%z))IR",
                                       R"IR(
graph(%x, %w, %b, %alpha : int, %approx : str):
  %m = aten::matmul(%x, %w)
  %tanh : str = prim::Constant[value="tanh"]()
  %t : bool = aten::eq(%approx, %tanh)
  %z = slapo::bias_gelu(%m, %b, %t)
  return (%z))IR");
  if (chosen)
    gelu_rewriter.RegisterRewritePattern(R"IR(
graph(%x, %b, %alpha : int, %approx : str):
  %y = aten::add(%x, %b, %alpha)
  %z = aten::gelu(%y, %approx)
  return (%z))IR",
                                         R"IR(
graph(%x, %b, %alpha : int, %approx : str):
  %tanh : str = prim::Constant[value="tanh"]()
  %t : bool = aten::eq(%approx, %tanh)
  %z = slapo::bias_gelu(%x, %b, %t)
  return (%z))IR");
  gelu_rewriter.runOnGraph(graph_, is_bias_gelu);

  // Attention scores: scale, add the additive mask, softmax over the last dim.
  torch::jit::SubgraphRewriter softmax_rewriter;
  softmax_rewriter.RegisterRewritePattern(R"IR(
graph(%x, %c : float, %mask, %alpha : int, %dim : int, %dtype : int):
  %s = aten::div(%x, %c)
  %m = aten::add(%s, %mask, %alpha)
  %p = aten::softmax(%m, %dim, %dtype)
  return (%p))IR",
                                          R"IR(
graph(%x, %c : float, %mask, %alpha : int, %dim : int, %dtype : int):
  %one : float = prim::Constant[value=1.0]()
  %scale : float = aten::div(%one, %c)
  %p = slapo::masked_softmax(%x, %mask, %scale)
  return (%p))IR");
  softmax_rewriter.runOnGraph(graph_, is_masked_softmax);
  torch::jit::EliminateDeadCode(graph_);
  function_ = std::make_unique<torch::jit::GraphFunction>("slapo_traced", graph_, nullptr);
  return count() - before;
}

}  // namespace slapo

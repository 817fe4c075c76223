// The intra-op pass's analyses of attention's graph, written out in TorchScript IR: the tokens'
// dimension through its views and matmuls (src/plan/token_axes.h), where sequence parallelism may
// compute on each rank's tokens, and the tensors autograd keeps for backward (saved_tensors.h).
#include <doctest/doctest.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/irparser.h>

#include <string>
#include <unordered_map>

#include "plan/saved_tensors.h"
#include "plan/token_axes.h"

namespace {

// Attention's scores for a [2, 8, 16] input of 8 tokens split into 4 heads of 4, with a padding mask,
// a causal mask, a view that merges the tokens and a matmul that reduces over them.
const char* kAttention = R"IR(
graph(%x : Float(2, 8, 16, strides=[128, 16, 1], requires_grad=0, device=cpu),
      %causal : Float(8, 8, strides=[8, 1], requires_grad=0, device=cpu),
      %pad : Float(2, 1, 1, 8, strides=[8, 8, 8, 1], requires_grad=0, device=cpu)):
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %four : int = prim::Constant[value=4]()
  %eight : int = prim::Constant[value=8]()
  %last : int = prim::Constant[value=-1]()
  %before_last : int = prim::Constant[value=-2]()
  %shape : int[] = prim::ListConstruct(%two, %eight, %four, %four)
  %heads : Float(2, 8, 4, 4, strides=[128, 16, 4, 1], requires_grad=0, device=cpu) = aten::view(%x, %shape)
  %q : Float(2, 4, 8, 4, strides=[128, 4, 16, 1], requires_grad=0, device=cpu) = aten::transpose(%heads, %one, %two)
  %kt : Float(2, 4, 4, 8, strides=[128, 4, 1, 16], requires_grad=0, device=cpu) = aten::transpose(%q, %last, %before_last)
  %scores : Float(2, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cpu) = aten::matmul(%q, %kt)
  %padded : Float(2, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cpu) = aten::add(%scores, %pad, %one)
  %masked : Float(2, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cpu) = aten::add(%scores, %causal, %one)
  %none : NoneType = prim::Constant()
  %probs : Float(2, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cpu) = aten::softmax(%padded, %last, %none)
  %over_tokens : Float(2, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cpu) = aten::softmax(%padded, %two, %none)
  %reduced : Float(2, 4, 4, 4, strides=[64, 16, 4, 1], requires_grad=0, device=cpu) = aten::matmul(%kt, %q)
  %flat_shape : int[] = prim::ListConstruct(%two, %last)
  %flat : Float(2, 128, strides=[128, 1], requires_grad=0, device=cpu) = aten::view(%x, %flat_shape)
  return (%probs, %masked, %over_tokens, %reduced, %flat)
)IR";

struct Parsed {
  std::shared_ptr<torch::jit::Graph> graph = std::make_shared<torch::jit::Graph>();
  std::unordered_map<std::string, torch::jit::Value*> values;
  explicit Parsed(const char* ir) { torch::jit::parseIR(ir, graph.get(), values); }
  const torch::jit::Node* node(const char* output) const { return values.at(output)->node(); }
};

}  // namespace

TEST_CASE("token axes follow a split through views, transposes and attention's matmuls") {
  Parsed p(kAttention);
  auto axes = slapo::plan::trace_token_axes(*p.graph, 1);
  auto axis = [&](const char* name) { return axes.at(p.values.at(name)); };
  CHECK(axis("x") == 1);
  CHECK(axis("heads") == 1);   // [b, s, heads, d]: the leading sizes kept
  CHECK(axis("q") == 2);       // transposed to [b, heads, s, d]
  CHECK(axis("kt") == 3);      // the keys' tokens become the columns
  CHECK(axis("scores") == 2);  // this rank's queries' rows
  CHECK(axis("reduced") == -1);  // a matmul over the tokens mixes them
  CHECK(axis("flat") == -1);     // a view that merges the tokens with the features
  CHECK(axis("over_tokens") == -1);
  CHECK(!axes.count(p.values.at("causal")));  // not computed from the input

  auto split = [&](const torch::jit::Value* v) { return axes.count(v) > 0; };
  CHECK(slapo::plan::matmul_on_tokens(p.node("scores"), axes));
  CHECK(!slapo::plan::matmul_on_tokens(p.node("reduced"), axes));
  // a padding mask broadcasts along the queries; a causal mask needs each rank's row offset
  CHECK(slapo::plan::computes_on_tokens(p.node("padded"), axes, split));
  CHECK(!slapo::plan::computes_on_tokens(p.node("masked"), axes, split));
  // softmax over the keys, not over the split queries
  CHECK(slapo::plan::computes_on_tokens(p.node("probs"), axes, split));
  CHECK(!slapo::plan::computes_on_tokens(p.node("over_tokens"), axes, split));
  CHECK(slapo::plan::computes_on_tokens(p.node("heads"), axes, split));
  CHECK(!slapo::plan::computes_on_tokens(p.node("flat"), axes, split));
}

TEST_CASE("autograd keeps a matmul's operands and softmax's output, not the scores before it") {
  Parsed p(kAttention);
  auto saved = slapo::plan::saved_for_backward(*p.graph, [](const torch::jit::Node*) { return false; });
  auto kept = [&](const char* name) { return saved.count(p.values.at(name)) > 0; };
  CHECK(kept("x"));          // q and k^T are views of it: their base is kept
  CHECK(!kept("q"));
  CHECK(!kept("kt"));
  CHECK(!kept("scores"));    // the additions read none of their inputs back
  CHECK(!kept("padded"));    // softmax keeps its output, not its input
  CHECK(kept("probs"));
  CHECK(kept("over_tokens"));
  CHECK(!kept("masked"));
}

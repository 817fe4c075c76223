// The schedule tree and its log, from C++.
#include <torch/torch.h>
#include <doctest/doctest.h>

#include "core/error.h"
#include "core/schedule.h"
#include "distributed/world.h"
#include "models/zoo.h"

using namespace slapo;

namespace {
std::shared_ptr<Module> tiny_gpt2() {
  BuildOptions o;
  o.tensor_options = at::TensorOptions().device(at::kMeta);
  return build_model(ModelConfig(nlohmann::json{{"model_type", "gpt2"}, {"n_embd", 16}, {"n_layer", 3}, {"n_head", 2},
                                                {"vocab_size", 10}, {"n_positions", 8}}),
                     o);
}
}  // namespace

TEST_CASE("schedule: paths resolve to the model's own modules") {
  auto model = tiny_gpt2();
  auto sch = Schedule::create(model, dist::world());
  auto attn = sch->at("transformer.h.2.attn");
  CHECK(attn->path() == "transformer.h.2.attn");
  CHECK(attn->name() == "attn");
  CHECK(attn->mod() == model->child("transformer")->child("h")->child("2")->child("attn"));
  CHECK(attn->parent()->path() == "transformer.h.2");
  CHECK(sch->at("transformer")->at("h.2.attn") == attn);
  CHECK(sch->named_schedules().size() == model->named_modules("", false).size());
}

TEST_CASE("schedule: an unknown token names the closest child and all children") {
  auto sch = Schedule::create(tiny_gpt2(), dist::world());
  try {
    sch->at("transformer.h.0.mpl");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "schedule: no module 'mpl' under 'transformer.h.0' (did you mean 'mlp'?); its children are: ln_1, attn, "
          "ln_2, mlp");
  }
}

TEST_CASE("schedule log: prints replayable Lua with paths, arguments and sources") {
  auto sch = Schedule::create(tiny_gpt2(), dist::world());
  sch->log().append({"shard", "transformer.h.0.attn.c_attn", {lua_quote("weight"), "1"}, "gpt2_schedule.lua:7"});
  sch->log().append({"checkpoint", "", {}, ""});
  CHECK(sch->log().to_lua() ==
        "-- slapo schedule log: 2 primitives\n"
        "return function(sch, args)\n"
        "  sch[\"transformer.h.0.attn.c_attn\"]:shard(\"weight\", 1)  -- gpt2_schedule.lua:7\n"
        "  sch:checkpoint()\n"
        "end\n");
  CHECK(sch->to_string().find("<- shard(\"weight\", 1)") != std::string::npos);
}

TEST_CASE("schedule log: Lua literals of values") {
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("axis", int64_t(1));
  d.insert("mode", std::string("fwd\"post"));
  CHECK(lua_literal(d) == "{axis = 1, mode = \"fwd\\\"post\"}");
  CHECK(lua_literal(Value(0.5)) == "0.5");
  CHECK(lua_literal(Value()) == "nil");
}

namespace {
std::vector<std::string> parameter_names(const Module& m) {
  std::vector<std::string> out;
  for (auto& p : m.named_parameters()) out.push_back(p.key());
  return out;
}
}  // namespace

TEST_CASE("module: a child removed and inserted back stands where it stood, in LibTorch's order too") {
  auto model = tiny_gpt2();
  auto block = model->child("transformer")->child("h")->child("1");
  auto before = parameter_names(*block);
  auto attn = block->child("attn");
  CHECK(block->remove_child("attn") == 1);
  CHECK_FALSE(block->has_child("attn"));
  block->insert_child(1, "attn", attn);
  CHECK(block->children_in_order()[1].first == "attn");
  CHECK(parameter_names(*block) == before);
  CHECK_THROWS_AS(block->remove_child("nope"), Error);
}

TEST_CASE("module: unscheduled names leave out wrappers that hold moved leaves, and a copy takes them back") {
  auto model = tiny_gpt2();
  auto block = model->child("transformer")->child("h")->child("0");
  auto names = parameter_names(*model);
  // what checkpoint(subgraph) does to a flattened trace of the block: attn.c_attn moves into a
  // wrapper at the same path below the block, in a holder standing for attn
  struct Wrapper : ModuleBase<Wrapper> {
    Wrapper() : ModuleBase("CheckPointWrapper") {}
    Value forward(Values) override { return Value(); }
  };
  struct Holder : ModuleBase<Holder> {
    Holder() : ModuleBase("Module") {}
    Value forward(Values) override { return Value(); }
  };
  auto wrapper = std::make_shared<Wrapper>();
  block->set_child("CheckPointWrapper_0", wrapper);
  auto holder = std::make_shared<Holder>();
  wrapper->set_child("attn", holder);
  auto attn = block->child("attn");
  auto c_attn = attn->child("c_attn");
  size_t index = attn->remove_child("c_attn");
  holder->set_child("c_attn", c_attn);
  wrapper->meta().moved_leaves.push_back({"attn.c_attn", index});

  CHECK(model->named_parameters().contains("transformer.h.0.CheckPointWrapper_0.attn.c_attn.weight"));
  CHECK(unscheduled_name(*model, "transformer.h.0.CheckPointWrapper_0.attn.c_attn.weight") ==
        "transformer.h.0.attn.c_attn.weight");
  CHECK(unscheduled_name(*model, "transformer.h.0.attn.c_proj.bias") == "transformer.h.0.attn.c_proj.bias");
  CHECK(unscheduled_name(*block, "CheckPointWrapper_0.attn.c_attn") == "attn.c_attn");

  auto copy = model->deep_clone();
  CHECK(parameter_names(*copy) == names);  // every leaf back in its place, in the model's order
  CHECK_FALSE(copy->child("transformer")->child("h")->child("0")->has_child("CheckPointWrapper_0"));
  CHECK(model->child("transformer")->child("h")->child("0")->has_child("CheckPointWrapper_0"));
}

TEST_CASE("schedule log: what was applied to a moved module shows under its new path") {
  auto sch = Schedule::create(tiny_gpt2(), dist::world());
  sch->log().append({"annotate", "transformer.h.0.attn.c_attn", {lua_quote("weight"), lua_quote("k"), "1"}, ""});
  sch->log().append({"sync", "transformer.h.0.attn.c_proj", {lua_quote("fwd_post")}, ""});
  sch->log().note_module_moved("transformer.h.0.attn", "transformer.h.0.W_0.attn");
  sch->log().append({"shard", "transformer.h.0.W_0.attn.c_attn", {lua_quote("weight"), "1"}, ""});
  CHECK(sch->log().current_path(0, "annotate", "transformer.h.0.attn.c_attn") == "transformer.h.0.W_0.attn.c_attn");
  CHECK(sch->log().current_path(1, "sync", "transformer.h.0.attn.c_proj") == "transformer.h.0.W_0.attn.c_proj");
  CHECK(sch->log().current_path(2, "shard", "transformer.h.0.W_0.attn.c_attn") == "transformer.h.0.W_0.attn.c_attn");
  CHECK(sch->log().current_path(0, "annotate", "transformer.h.0.attn_x") == "transformer.h.0.attn_x");
  sch->log().note_syncs_moved("transformer.h.1.mlp.c_fc", "transformer.h.1.mlp.Fused_0");
  CHECK(sch->log().current_path(0, "annotate", "transformer.h.1.mlp.c_fc") == "transformer.h.1.mlp.c_fc");
  CHECK(sch->log().current_path(1, "sync", "transformer.h.1.mlp.c_fc") == "transformer.h.1.mlp.Fused_0");
}

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

// fork_rng: a module draws its random numbers from its own stream, distinct per rank (as
// Megatron's model-parallel RNG tracker), so dropout masks differ across tensor-parallel ranks.
#include <ATen/CPUGeneratorImpl.h>

#include "core/error.h"
#include "distributed/group.h"
#include "primitives/primitives.h"
#include "primitives/rng.h"

namespace slapo {

namespace {
constexpr uint64_t kForkOffset = 2718;  // Megatron's offset between the default and parallel seeds
}

void fork_rng(Schedule& sch, int64_t seed, const CallSite& site) {
  Module& m = *sch.mod();
  if (m.meta().rng_state)
    throw Error(fmt::format("fork_rng: {} ({}) already has its own random stream", sch.where(), m.type_name()));
  // Step 1. The module's stream: seeded by the base seed, the offset and the rank.
  uint64_t base = seed >= 0 ? static_cast<uint64_t>(seed) : at::detail::getDefaultCPUGenerator().current_seed();
  auto gen =
      at::make_generator<at::CPUGeneratorImpl>(base + kForkOffset + static_cast<uint64_t>(sch.group()->rank()));
  auto state = std::make_shared<at::Tensor>(gen.get_state());
  // Step 2. Swap it in around every call (a stack keeps nested and recursive calls right).
  auto saved = std::make_shared<std::vector<at::Tensor>>();
  m.add_forward_pre_hook([state, saved](Module&, Values&) {
    saved->push_back(cpu_rng_state());
    set_cpu_rng_state(*state);
  });
  m.add_forward_post_hook([state, saved](Module&, const Values&, Value&) {
    *state = cpu_rng_state();
    set_cpu_rng_state(saved->back());
    saved->pop_back();
  });
  m.meta().rng_state = state;
  sch.log().append({"fork_rng", sch.path(), site.lua_args, site.source});
}

}  // namespace slapo

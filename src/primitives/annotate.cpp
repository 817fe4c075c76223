// annotate: attach metadata to a parameter.
#include "core/error.h"
#include "primitives/primitives.h"

namespace slapo {

void annotate(Schedule& sch, const std::string& param, const std::string& key, const Value& value,
              const CallSite& site) {
  Module& m = *sch.mod();
  if (!m.has_param(param))
    throw Error(fmt::format("annotate: {} ({}) has no parameter '{}'; its parameters are: {}", sch.where(),
                            m.type_name(), param, join_or_none(m.named_parameters(false).keys())));
  if (key.empty()) throw Error(fmt::format("annotate: the key for '{}' of {} is empty", param, sch.where()));
  lua_literal(value);  // raises for values the log could not print back
  m.meta().annotations[param][key] = value;
  sch.log().append({"annotate", sch.path(), site.lua_args, site.source});
}

}  // namespace slapo

// decompose and fuse: split a linear layer into matmul + bias add, then map traced patterns onto
// the fused kernels.
#include "core/error.h"
#include "graph/traced_graph.h"
#include "primitives/primitives.h"

namespace slapo {

void decompose(Schedule& sch, const CallSite& site) {
  Module& m = *sch.mod();
  if (m.type_name() != "Linear" && m.type_name() != "Conv1D")
    throw Error(fmt::format("decompose: {} is a {}; decompose splits Linear and Conv1D into matmul + bias add",
                            sch.where(), m.type_name()));
  if (m.meta().decomposed) throw Error(fmt::format("decompose: {} is decomposed already", sch.where()));
  if (sch.parent() && sch.parent()->mod()->meta().graph)
    throw Error(fmt::format("decompose: the parent of {} is traced already; decompose first, then trace", sch.where()));
  m.meta().decomposed = true;
  sch.log().append({"decompose", sch.path(), site.lua_args, site.source});
}

int fuse(Schedule& sch, const std::string& compiler, const CallSite& site) {
  auto& graph = sch.mod()->meta().graph;
  if (!graph) throw Error(fmt::format("fuse: {} is not traced; trace{{inputs = ...}} it first", sch.where()));
  if (compiler != "kernels" && compiler != "torchscript")
    throw Error(fmt::format("fuse: unknown compiler '{}' for {} (choices: kernels, torchscript)", compiler, sch.where()));
  if (compiler == "torchscript") {  // LibTorch's passes; finding nothing to remove is no error
    int removed = graph->optimize_torchscript();
    sch.log().append({"fuse", sch.path(), site.lua_args, site.source});
    return removed;
  }
  int fused = graph->fuse_kernels();
  if (fused == 0)
    throw Error(fmt::format("fuse: no kernel pattern in {} (looked for: {}; decompose the Linear/Conv1D and trace "
                            "with flatten so the ops are in the graph)",
                            sch.where(), kernel_patterns(/*chosen=*/false)));
  sch.log().append({"fuse", sch.path(), site.lua_args, site.source});
  return fused;
}

}  // namespace slapo

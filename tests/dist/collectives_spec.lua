-- slapo.dist on real c10d ranks (run with: slapo-lua test --nproc 2 tests/dist).
local rank, world = slapo.dist.rank(), slapo.dist.world_size()

describe("dist", function()
  it("runs on several ranks", function()
    assert(world >= 2, "run these specs with --nproc 2 or more")
  end)

  it("knows the node layout the launcher gave: one node holds every rank of --nproc", function()
    eq(rank, slapo.dist.local_rank())
    eq(0, slapo.dist.node_rank())
    eq(world, slapo.dist.local_world_size())
    eq("dist.local_rank: takes 0 arguments, got 1 (the form is dist.local_rank())",
      pcall_err(slapo.dist.local_rank, 1))
  end)

  it("all_reduce sums in place", function()
    local t = slapo.ones({ 3 }) * (rank + 1)
    eq(t, slapo.dist.all_reduce(t))
    eq(3 * world * (world + 1) / 2, t:sum():item())
  end)

  it("all_gather concatenates every rank's tensor in rank order", function()
    local g = slapo.dist.all_gather(slapo.ones({ 2, 1 }) * rank, 1)
    eq({ 2, world }, g:size())
    for r = 0, world - 1 do
      eq(2 * r, g:narrow(1, r, 1):sum():item())
    end
  end)

  it("broadcast copies the source rank's tensor", function()
    local t = slapo.ones({ 4 }) * (rank + 10)
    slapo.dist.broadcast(t, world - 1)
    eq(4 * (world - 1 + 10), t:sum():item())
  end)

  it("reduces, gathers and broadcasts bfloat16 tensors (over Gloo as float32) and keeps their dtype", function()
    local t = (slapo.ones({ 3 }) * (rank + 1)):to("bfloat16")
    slapo.dist.all_reduce(t)
    eq("bfloat16", t:dtype())
    eq(3 * world * (world + 1) / 2, t:float():sum():item())
    local g = slapo.dist.all_gather((slapo.ones({ 2 }) * rank):to("bfloat16"), 0)
    eq("bfloat16", g:dtype())
    eq(2 * world * (world - 1) / 2, g:float():sum():item())
    local b = (slapo.ones({ 4 }) * (rank + 10)):to("bfloat16")
    slapo.dist.broadcast(b, world - 1)
    eq("bfloat16", b:dtype())
    eq(4 * (world - 1 + 10), b:float():sum():item())
  end)

  it("ranks that make different calls get an error naming each call, not an aborted process", function()
    -- what a loop over pairs() does when each rank visits the keys in its own order
    local params = { { 16, 8 }, { 36 } }
    local mine = params[rank % 2 + 1]
    local err = pcall_err(slapo.dist.all_reduce, slapo.zeros(mine))
    matches("dist%.all_reduce: the ranks of .* made different calls %(rank 0: all_reduce of a Float %[16, 8%] tensor; "
      .. "rank 1: all_reduce of a Float %[36%] tensor", err)
    matches("loop over sorted keys", err)
    err = pcall_err(function()
      if rank == 0 then slapo.dist.barrier() else slapo.dist.broadcast(slapo.zeros({ 2 }), 0) end
    end)
    matches("rank 0: barrier; rank 1: broadcast of a Float %[2%] tensor", err)
    -- and the group still works afterwards
    local t = slapo.ones({ 2 })
    slapo.dist.all_reduce(t)
    eq(2 * world, t:sum():item())
  end)

  it("reduce_scatter keeps this rank's part of the sum (emulated on Gloo)", function()
    local t = slapo.arange(2 * world):float()
    local part = slapo.dist.reduce_scatter(t, 0)
    eq({ 2 }, part:size())
    eq({ world * 2 * rank, world * (2 * rank + 1) }, part:tolist())
  end)

  it("new_group builds sub-groups that run their own collectives", function()
    local evens = slapo.dist.new_group({ 0 })
    if rank == 0 then
      eq(0, slapo.dist.rank(evens))
      local t = slapo.ones({ 1 })
      slapo.dist.all_reduce(t, evens)
      eq(1, t:item())
    else
      eq(-1, slapo.dist.rank(evens))
      matches("this rank is not in group", pcall_err(function() slapo.dist.all_reduce(slapo.ones({ 1 }), evens) end))
    end
  end)
end)

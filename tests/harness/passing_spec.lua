describe("harness", function()
  it("passes", function() eq(2, 1 + 1) end)
  it("skips with a reason", function() skip("no GPU: harness fixture") end)
end)

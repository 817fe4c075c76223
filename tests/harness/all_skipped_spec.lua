describe("harness", function()
  it("cannot run here", function() skip("no GPU: harness fixture") end)
end)

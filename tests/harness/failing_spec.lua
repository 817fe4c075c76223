describe("harness", function()
  it("passes", function() eq(2, 1 + 1) end)
  it("fails", function() eq(3, 1 + 1) end)
end)

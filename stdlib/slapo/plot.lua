--- `slapo-lua plot metrics.jsonl [out.svg]`: an SVG with the loss and the throughput per step,
--- readable in any browser. Writes next to the input (metrics.svg) unless told otherwise.
local M = {}

local function read_metrics(path)
  local f, err = io.open(path, "r")
  if not f then
    error(("plot: cannot read '%s': %s"):format(path, err), 0)
  end
  local rows = {}
  local n = 0
  for line in f:lines() do
    n = n + 1
    if line:match("%S") then
      local row = {}
      for key, value in line:gmatch('"([%w_]+)"%s*:%s*([-%d%.eE+]+)') do
        row[key] = tonumber(value)
      end
      if not row.step then
        f:close()
        error(("plot: line %d of '%s' has no \"step\" field (is it a slapo metrics.jsonl?)"):format(n, path), 0)
      end
      table.insert(rows, row)
    end
  end
  f:close()
  if #rows == 0 then
    error(("plot: '%s' holds no metrics"):format(path), 0)
  end
  return rows
end

-- One chart: a polyline of `key` against step in the box (x, y, w, h).
local function chart(out, rows, key, title, color, x, y, w, h)
  local lo, hi = math.huge, -math.huge
  local first, last = rows[1].step, rows[#rows].step
  for _, r in ipairs(rows) do
    if r[key] then
      lo, hi = math.min(lo, r[key]), math.max(hi, r[key])
    end
  end
  if lo == math.huge then
    return
  end
  if hi == lo then
    hi = lo + 1
  end
  local points = {}
  for _, r in ipairs(rows) do
    if r[key] then
      local px = x + (last == first and 0 or (r.step - first) / (last - first) * w)
      local py = y + h - (r[key] - lo) / (hi - lo) * h
      table.insert(points, ("%.1f,%.1f"):format(px, py))
    end
  end
  table.insert(out, ('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#ccc"/>'):format(x, y, w, h))
  table.insert(out, ('<text x="%d" y="%d" font-size="14">%s</text>'):format(x, y - 8, title))
  table.insert(out, ('<text x="%d" y="%d" font-size="11" text-anchor="end">%.4g</text>'):format(x - 4, y + 10, hi))
  table.insert(out, ('<text x="%d" y="%d" font-size="11" text-anchor="end">%.4g</text>'):format(x - 4, y + h, lo))
  table.insert(out, ('<text x="%d" y="%d" font-size="11">step %d</text>'):format(x, y + h + 14, first))
  table.insert(out, ('<text x="%d" y="%d" font-size="11" text-anchor="end">step %d</text>'):format(x + w, y + h + 14, last))
  table.insert(out, ('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'):format(color,
    table.concat(points, " ")))
end

function M.main(input, output)
  local rows = read_metrics(input)
  output = output or input:gsub("%.jsonl$", "") .. ".svg"
  local out = { '<svg xmlns="http://www.w3.org/2000/svg" width="760" height="520" font-family="sans-serif">',
    '<rect width="100%" height="100%" fill="white"/>' }
  chart(out, rows, "loss", "loss", "#1f77b4", 70, 40, 660, 180)
  chart(out, rows, "tokens_per_s", "tokens/s", "#d62728", 70, 300, 660, 180)
  table.insert(out, "</svg>")
  local f = assert(io.open(output, "w"))
  f:write(table.concat(out, "\n"), "\n")
  f:close()
  print(("plot: %d steps -> %s"):format(#rows, output))
  return output
end

return M

--- The tuner's chart: one panel per knob, throughput (tokens/s, else steps/s) against the knob's
--- choices, a dot per measured trial, a cross at the bottom for each infeasible one, the best
--- configuration's dot ringed. Written by `slapo-lua tune --show` next to the database.
local M = {}

local function literal(v)
  return type(v) == "string" and v or tostring(v)
end

local function escape(text)
  return (tostring(text):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"))
end

local function throughput(row)
  local m = row.metrics
  if type(m) ~= "table" then
    return nil
  end
  return m.tokens_per_s or (m.step_s and m.step_s > 0 and 1 / m.step_s) or nil
end

-- One panel: x = the knob's choices (evenly spaced), y = throughput from 0 to the highest.
local function panel(out, knob, rows, best, hi, unit, x, y, w, h)
  local n = #knob.choices
  local function px(value)
    for i, c in ipairs(knob.choices) do
      if literal(c) == literal(value) then
        return x + (n == 1 and w / 2 or (i - 1) / (n - 1) * w)
      end
    end
  end
  table.insert(out, ('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#ccc"/>'):format(x, y, w, h))
  table.insert(out, ('<text x="%d" y="%d" font-size="14">%s</text>'):format(x, y - 8, escape(knob.name)))
  table.insert(out, ('<text x="%d" y="%d" font-size="11" text-anchor="end">%.4g</text>'):format(x - 4, y + 10, hi))
  table.insert(out, ('<text x="%d" y="%d" font-size="11" text-anchor="end">0 %s</text>'):format(x - 4, y + h, unit))
  for _, c in ipairs(knob.choices) do
    table.insert(out, ('<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%s</text>'):format(px(c), y + h + 14,
      escape(literal(c))))
  end
  for _, row in ipairs(rows) do
    local cx = px(row.config[knob.name])
    if cx then
      local value = row.status == "ok" and throughput(row)
      if value then
        local cy = y + h - value / hi * h
        table.insert(out, ('<circle cx="%.1f" cy="%.1f" r="4" fill="#1f77b4" fill-opacity="0.7"><title>%s</title></circle>')
          :format(cx, cy, escape(row.label)))
        if row == best then
          table.insert(out, ('<circle cx="%.1f" cy="%.1f" r="8" fill="none" stroke="#2ca02c" stroke-width="2"/>')
            :format(cx, cy))
        end
      else
        local cy = y + h - 6
        table.insert(out, ('<text x="%.1f" y="%.1f" font-size="12" fill="#d62728" text-anchor="middle">x<title>%s</title></text>')
          :format(cx, cy + 4, escape(row.label .. ": " .. row.status)))
      end
    end
  end
end

--- rows: one setup's rows (each with config, status, metrics, label); knobs: the declared space.
--- Returns the SVG text.
function M.svg(rows, knobs, title)
  local hi, best = 0, nil
  local unit = "tok/s"
  for _, row in ipairs(rows) do
    local value = row.status == "ok" and throughput(row)
    if value and value > hi then
      hi, best = value, row
    end
    if row.status == "ok" and type(row.metrics) == "table" and not row.metrics.tokens_per_s then
      unit = "steps/s"
    end
  end
  if hi == 0 then
    hi = 1
  end
  local w, h, gap = 300, 160, 70
  local cols = math.min(#knobs, 2)
  local height = 60 + math.ceil(#knobs / cols) * (h + gap)
  local out = { ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">')
    :format(80 + cols * (w + 60), height), '<rect width="100%" height="100%" fill="white"/>',
    ('<text x="20" y="24" font-size="15">%s</text>'):format(escape(title)) }
  for i, knob in ipairs(knobs) do
    local col, line = (i - 1) % cols, math.floor((i - 1) / cols)
    panel(out, knob, rows, best, hi, unit, 80 + col * (w + 60), 60 + line * (h + gap), w, h)
  end
  table.insert(out, "</svg>")
  return table.concat(out, "\n") .. "\n"
end

return M

-- A small Mixtral (4 experts a layer, each token routed to 2) learns State of the Union addresses
-- with LLaMA-2's SentencePiece tokenizer (32,000 pieces with byte fallback, the scheme Mixtral's
-- own follows; data/llama2-tokenizer, fetched by scripts/setup). The loss adds the router's
-- load-balancing term (router_aux_loss_coef 0.02, as Mixtral trains), each replica's over its own rows
-- as under transformers' data parallelism, so several ranks' losses differ a little from one's.
-- On several ranks every rank is a data-parallel replica with its share of each step's --batch rows,
-- and --ep N spreads every layer's experts over N of them (slapo.parallel.layout{ep = N} and the
-- Mixtral reference schedule): each rank holds experts / N of them, and tokens travel to theirs.
--   build/slapo-lua run examples/mixtral_sotu.lua [--steps 300] [--texts 20] [--experts 4]
--   build/slapo-lua run --nproc 2 examples/mixtral_sotu.lua --ep 2
--   build/slapo-lua plot mixtral_sotu.jsonl
local train = require("_train")
local text = require("slapo.text")
local opts = train.sotu_options({ metrics = "mixtral_sotu.jsonl", experts = 4, top_k = 2, ep = 1 })
local tokenizer = slapo.tokenizer(text.data_dir() .. "/llama2-tokenizer")
local layout = require("slapo.parallel").layout({ ep = opts.ep })  -- every rank a replica
train.log(("%d rank(s): data parallel %d, experts over %d of them"):format(layout.world, layout.dp, layout.ep))
train.sotu(opts, function(o)
  local model = slapo.models.mixtral({ vocab_size = tokenizer.vocab_size, hidden_size = o.hidden,
    num_hidden_layers = o.layers, num_attention_heads = o.heads, num_key_value_heads = math.max(1, math.floor(o.heads / 2)),
    intermediate_size = math.floor(o.hidden * 7 / 2), num_local_experts = o.experts, num_experts_per_tok = o.top_k,
    max_position_embeddings = o.seq, output_router_logits = true, router_aux_loss_coef = 0.02 })
  local whole = model:num_params()
  local sch = slapo.create_schedule(model, { group = layout.tp_group })  -- tp = 1: attention whole on each rank
  require("slapo.schedules.mixtral").schedule(sch, { ep_group = layout.ep > 1 and layout.ep_group or nil })
  train.log(("Mixtral: %.2fM parameters, %.2fM on each rank"):format(whole / 1e6, sch.mod:num_params() / 1e6))
  return sch.mod
end, { tokenizer = tokenizer, layout = layout })

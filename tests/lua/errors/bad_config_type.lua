-- expect: config: field 'n_layer' must be an integer, got "two"
-- A config.json field of the wrong type is named with its value.
slapo.models.gpt2({ n_layer = "two" })

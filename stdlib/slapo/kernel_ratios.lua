-- Fused / unfused time (forward + backward) of each slapo.kernels op against the ATen ops it
-- replaces, by device type, as bench/kernels.lua measured them; `--record` rewrites a device's
-- row. slapo.kernel_choices reads it.
return {
  cpu = {
    measured = "bench/kernels.lua, 2-core AMD EPYC, LibTorch 1.13, 2026-11-21",
    bias_gelu = 1.08, rms_norm = 0.30, swiglu = 0.83, masked_softmax = 0.82,
    bias_dropout_add_layer_norm = 0.82, attention = 0.33,
  },
  cuda = {
    measured = "bench/kernels.lua --device cuda, H100, LibTorch 2.11 + CUDA 13, 2026-11-23",
    bias_gelu = 1.21, rms_norm = 2.09, swiglu = 0.70, masked_softmax = 0.93,
    bias_dropout_add_layer_norm = 7.68, attention = 28.3,
  },
}

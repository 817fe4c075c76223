-- Fused / unfused time (forward + backward) of each slapo.kernels op against the ATen ops it
-- replaces, by device type, as bench/kernels.lua measured them; `--record` rewrites a device's
-- row. slapo.kernel_choices reads it.
return {
  cpu = {
    measured = "bench/kernels.lua on 2 cores, AMD EPYC, LibTorch 1.13, 2026-11-23",
    bias_gelu = 1.15,
    rms_norm = 0.28,
    swiglu = 1.53,
    masked_softmax = 0.86,
    bias_dropout_add_layer_norm = 0.97,
    attention = 0.45,
  },
  cuda = {
    measured = "bench/kernels.lua --device cuda, H200, LibTorch 2.11 + CUDA 13, 2026-11-29 (bench/gpu/lease)",
    bias_gelu = 1.00,
    rms_norm = 0.40,
    swiglu = 1.28,
    masked_softmax = 1.17,
    bias_dropout_add_layer_norm = 0.84,
    attention = 0.72,
  },
}

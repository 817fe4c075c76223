// Precompiled once (SLAPO_PCH): every torch-including file then compiles in seconds.
#pragma once
#include <torch/torch.h>

// slapo.init_empty_weights(fn): while fn runs, layers and zoo models are made on the meta device
// (shapes, no memory, no initialisation); slapo.build materialises and initialises them.
#pragma once

namespace slapo {

/// True while an init_empty_weights function runs.
bool lx_empty_weights();
void lx_set_empty_weights(bool on);

}  // namespace slapo

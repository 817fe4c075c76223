// Whether this build runs under AddressSanitizer (scripts/sanitize, SLAPO_SANITIZE=ON): what
// cannot work there (an address-space limit, which its shadow memory exceeds) says so.
#pragma once

namespace slapo {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace slapo

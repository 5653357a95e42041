// Test support: how much slower this build runs than a plain optimised one, for the few tests
// that bound a running time to catch a complexity regression (quadratic parsing, say): an
// AddressSanitizer build runs several times slower without anything being wrong.
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TRIDENT_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TRIDENT_TEST_ASAN 1
#endif

namespace trident::test_support {

#ifdef TRIDENT_TEST_ASAN
inline constexpr double kTimeScale = 4;
#else
inline constexpr double kTimeScale = 1;
#endif

}  // namespace trident::test_support

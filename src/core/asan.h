// Whether this build runs under AddressSanitizer (GCC defines __SANITIZE_ADDRESS__; Clang reports the
// feature): code and tests that depend on what ASan intercepts ask here.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define TESSERA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TESSERA_ASAN 1
#endif
#endif

namespace tessera {

#ifdef TESSERA_ASAN
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif

}  // namespace tessera

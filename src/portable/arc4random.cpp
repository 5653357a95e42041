// arc4random for a static libstdc++ on older C libraries. std::random_device in GCC 12's
// libstdc++ calls arc4random, which glibc added only in 2.36; a binary linked statically
// against that libstdc++ then refuses to start where glibc is older (the H200 machines of
// docs/GPU.md). This definition, linked only into portable builds, reads the kernel's
// random source instead, so the binary needs nothing newer than glibc 2.25.
#include <sys/random.h>

#include <cstddef>
#include <cstdint>

extern "C" void arc4random_buf(void* buf, size_t n) {
  auto* p = static_cast<unsigned char*>(buf);
  while (n > 0) {
    const ssize_t got = getrandom(p, n, 0);
    if (got <= 0) continue;  // interrupted: try again
    p += got;
    n -= static_cast<size_t>(got);
  }
}

extern "C" uint32_t arc4random(void) {
  uint32_t v = 0;
  arc4random_buf(&v, sizeof v);
  return v;
}

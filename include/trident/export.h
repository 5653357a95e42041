// TRIDENT_API marks what libtrident.so exports. The library is built with hidden visibility,
// so the declarations under include/trident/ are its whole ABI, while the engine's internals and
// the oneDNN, protobuf and CUDA symbols they bring stay private to it.
#pragma once

#define TRIDENT_API __attribute__((visibility("default")))

// TRIDENT_VERBOSE: where it is set, the compiler, the runtime and the backends say on stderr what
// they chose and how long it took (fused graph or fallback, tuned plan, each compile phase).
// In core so every layer can report without including the layers above it.
#pragma once
#include <string>

namespace trident {

// Whether TRIDENT_VERBOSE is set (and not "0"); read once.
bool verbose();
// One line on stderr, "trident <who> [+<ms since the process started> ms]: <line>"; lines from
// concurrent builds do not interleave. The elapsed time makes the lines a timeline of a compile.
void verbose_note(const char* who, const std::string& line);

// Milliseconds since `start` (a steady_clock reading), for the notes above.
double elapsed_ms(long long start_ns);
long long now_ns();
// "12.3 ms".
std::string ms_text(double ms);

}  // namespace trident

// Names read from files (ONNX node, op and tensor names, safetensors tensor names and metadata)
// are quoted in error messages; escaped here first, so a crafted name cannot send terminal
// escape sequences or forge extra lines, and invalid UTF-8 shows as its bytes.
#pragma once
#include <string>
#include <string_view>

namespace trident {

// `text` with C0 controls and DEL as \n, \r, \t or \xNN, bytes that are not valid UTF-8 as
// \xNN, and C1 controls and bidirectional-override characters as \u{NNNN}. Everything else is
// unchanged, so printable(printable(s)) == printable(s) and a plain name is itself.
std::string printable(std::string_view text);

// "'" + printable(text) + "'": how a name from a file appears in a message (not "quoted": std::quoted
// would win overload resolution for a std::string argument).
inline std::string quoted_name(std::string_view text) { return "'" + printable(text) + "'"; }

}  // namespace trident

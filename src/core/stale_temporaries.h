// Temporaries that killed runs left beside the files they were writing. Every temporary of an
// atomic write is named "<target>.tmp.<16 lowercase hex digits>" and is flock'ed by its writer
// until it is renamed, so one that is unlocked and untouched for a minute has no live writer.
#pragma once
#include <chrono>
#include <string>

namespace trident {

// The name of a temporary for `target` with the 16 hex digits `suffix`.
inline std::string temporary_name(const std::string& target, const std::string& suffix) {
  return target + ".tmp." + suffix;
}

// How long a temporary must be untouched before it counts as stale (a live writer holds its
// lock from a moment after creating it, and writes to it meanwhile).
inline constexpr std::chrono::seconds kStaleTemporaryAge{60};

// Removes the stale temporaries of `target`: entries of its directory named exactly like
// temporary_name(target, 16 hex digits) that are regular files (a link is never followed nor
// removed) owned by this user, older than kStaleTemporaryAge, with one link, and whose lock
// nobody holds. Returns how many it removed; anything it cannot read is left alone.
int remove_stale_temporaries(const std::string& target);

}  // namespace trident

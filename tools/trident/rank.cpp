// Rank-aware output and failure for the train command (rank.h).
#include "rank.h"

#include <iostream>
#include <new>
#include <streambuf>

#include "core/error.h"

namespace trident::cli {

namespace {
class NullBuffer final : public std::streambuf {
 protected:
  int overflow(int c) override { return c == traits_type::eof() ? 0 : c; }
};
}  // namespace

bool is_lead(const distributed::World* world) { return !world || world->rank() == 0; }

std::ostream& lead_stream(const distributed::World* world, std::ostream& os) {
  static NullBuffer sink_buffer;
  static std::ostream sink(&sink_buffer);
  return is_lead(world) ? os : sink;
}

int run_as_rank(distributed::World* world, const std::function<int()>& body) {
  if (!world || world->size() < 2) return body();
  auto fail = [&](const std::string& kind, const std::string& what, int code) {
    std::cerr << "trident: " << kind << ": " << distributed::rank_text(*world) << ": " << what
              << " (stopping every rank)" << std::endl;
    world->abort(code);
  };
  try {
    return body();
  } catch (const Error& e) {
    fail("error", e.what(), 1);
  } catch (const std::bad_alloc&) {
    fail("error", "out of memory; try a smaller --batch", 1);
  } catch (const std::exception& e) {
    fail("internal error", e.what(), 2);
  }
  return 1;  // not reached: abort() ends every rank
}

}  // namespace trident::cli

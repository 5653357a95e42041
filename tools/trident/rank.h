// What being one rank of a data-parallel `trident train` (under mpirun) means to the command
// line: rank 0 alone speaks (progress, results, --log, --save), and a failure on any rank ends
// the whole job with that rank's sentence instead of leaving the others waiting in a collective.
#pragma once
#include <functional>
#include <iosfwd>

#include "runtime/distributed/world.h"

namespace trident::cli {

// The stream a rank writes its reports to: `os` on rank 0 (or without a world), else a sink.
std::ostream& lead_stream(const distributed::World* world, std::ostream& os);
bool is_lead(const distributed::World* world);

// Runs `body`. With a world of several ranks, an exception escaping it prints
// "trident: error: rank R of N: <sentence>" and aborts every rank (non-zero exit); without
// one, exceptions pass on to main(), which reports them as always.
int run_as_rank(distributed::World* world, const std::function<int()>& body);

}  // namespace trident::cli

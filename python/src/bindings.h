// The pieces of the `trident._trident` extension module, each binding one part
// of the C++ API of include/trident/ (module.cpp puts them together).
#pragma once
#include <pybind11/pybind11.h>

namespace trident::python {

void bind_model(pybind11::module_& m);
void bind_network(pybind11::module_& m);

}  // namespace trident::python

# The Python module (python/): trident._trident, pybind11 bindings over libtrident.so, built
# into the build tree's python/ folder so tests import it with PYTHONPATH, and installed as the
# `python` component, which `pip install .` (pyproject.toml, scikit-build-core) puts in a wheel.
#
# pybind11 comes from Debian (pybind11-dev) like the project's other C++ dependencies, so the
# module builds with apt alone; AUTO builds it where Python's headers and pybind11 are found.
set(TRIDENT_BUILD_PYTHON AUTO CACHE STRING "Build the Python module: AUTO (where Python 3 headers and pybind11 are found), ON or OFF")
set_property(CACHE TRIDENT_BUILD_PYTHON PROPERTY STRINGS AUTO ON OFF)
if(TRIDENT_BUILD_PYTHON STREQUAL "OFF")
  return()
endif()

function(trident_python_unavailable reason)
  if(TRIDENT_BUILD_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "TRIDENT_BUILD_PYTHON is ON, but ${reason}")
  endif()
  message(STATUS "trident: Python module not built: ${reason}")
endfunction()

if(NOT TARGET trident_library)
  trident_python_unavailable("libtrident.so is not built (TRIDENT_BUILD_LIBRARY, TRIDENT_PORTABLE_BINARY)")
  return()
endif()
# The tests run the module with the project's .venv, so that is the interpreter built for.
if(NOT DEFINED Python_EXECUTABLE AND EXISTS ${PROJECT_SOURCE_DIR}/.venv/bin/python)
  set(Python_EXECUTABLE ${PROJECT_SOURCE_DIR}/.venv/bin/python)
endif()
find_package(Python 3.9 COMPONENTS Interpreter Development.Module)
if(NOT Python_Development.Module_FOUND)
  trident_python_unavailable("Python 3's headers were not found (Debian python3-dev)")
  return()
endif()
find_package(pybind11 2.10 CONFIG QUIET)
if(NOT pybind11_FOUND)
  trident_python_unavailable("pybind11 was not found (Debian pybind11-dev)")
  return()
endif()

file(GLOB TRIDENT_PYTHON_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/src/*.cpp)
# NO_EXTRAS: no link-time optimisation, which buys nothing in glue code and brings GCC 12 false warnings.
pybind11_add_module(trident_python MODULE NO_EXTRAS ${TRIDENT_PYTHON_SOURCES})
set(TRIDENT_PYTHON_DIR ${PROJECT_BINARY_DIR}/python)
set_target_properties(trident_python PROPERTIES OUTPUT_NAME _trident
  LIBRARY_OUTPUT_DIRECTORY ${TRIDENT_PYTHON_DIR}/trident
  # Installed, the module finds libtrident.so beside it.
  INSTALL_RPATH "$ORIGIN")
target_link_libraries(trident_python PRIVATE trident_library)
target_compile_definitions(trident_python PRIVATE TRIDENT_VERSION="${PROJECT_VERSION}")
file(GLOB TRIDENT_PYTHON_FILES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/trident/*.py)
foreach(file ${TRIDENT_PYTHON_FILES})
  get_filename_component(name ${file} NAME)
  configure_file(${file} ${TRIDENT_PYTHON_DIR}/trident/${name} COPYONLY)
endforeach()

install(TARGETS trident_python LIBRARY DESTINATION trident COMPONENT python)
install(TARGETS trident_library LIBRARY DESTINATION trident COMPONENT python NAMELINK_SKIP)
install(FILES ${TRIDENT_PYTHON_FILES} DESTINATION trident COMPONENT python)

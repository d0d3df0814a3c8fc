# `cpack -G DEB` in a build tree: one .deb of what `cmake --install` installs (libraries, public
# headers, the `brisk` CLI, the CMake package config) under /usr. docs/installing.md says how to
# build it portably (BRISK_NATIVE=OFF: a package must not carry the build host's -march=native)
# and scripts/package-test.sh checks that it installs and works.
set(CPACK_PACKAGE_NAME brisk)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "brisk")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "brisk: a deep-learning framework in C++20 with an Accelerate-like launcher")
set(CPACK_PACKAGE_DESCRIPTION
  "Tensors, autograd, CPU and CUDA kernels, nn, optim, mixed precision, data loading, distributed\n"
  "training and an Accelerate-like layer (`brisk launch/config/env/test`), as C++ libraries with a\n"
  "CMake package config (find_package(brisk)) and the `brisk` command-line tool.")
string(REPLACE ";" "" CPACK_PACKAGE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")
set(BRISK_PACKAGE_MAINTAINER "brisk developers <brisk-dev@users.noreply.github.com>" CACHE STRING
  "The Maintainer field of the .deb (cpack -G DEB)")
set(CPACK_PACKAGE_CONTACT "${BRISK_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${BRISK_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # brisk_<version>_<arch>.deb
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Run-time dependencies from the libraries actually linked (dpkg-shlibdeps over every ELF file:
# libopenblas0-pthread, libopenmpi3, libyaml-cpp0.7, zlib1g, libssl3, libgomp1, ...). The package's
# own libraries are found beside each other ($ORIGIN).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# What find_package(brisk) needs beyond the libraries (cmake/briskConfig.cmake.in's
# find_dependency calls): the development files of zlib and OpenSSL; OpenMP comes with g++.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "zlib1g-dev, libssl-dev")
# dpkg-shlibdeps says `libopenblas0` (any of Debian's OpenBLAS builds), but brisk links the pthread
# build by its path (kernels/cpu/blas.cpp says why), so that one it needs.
if(BRISK_WITH_OPENBLAS)
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libopenblas0-pthread")
endif()
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "g++ (>= 12), cmake (>= 3.25)")
if(BRISK_NATIVE)
  message(STATUS "brisk: BRISK_NATIVE=ON: a package built from this tree runs only on CPUs like this one "
    "(configure with -DBRISK_NATIVE=OFF for a portable .deb, docs/installing.md)")
endif()
include(CPack)

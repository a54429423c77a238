#!/usr/bin/env bash
# A short hash of the sources that a GPU run builds and runs (csrc/, blosa_kernels/,
# python/blosa/), independent of git: the device's copy of .git can lag its working tree.
cd "$(dirname "$0")/../.."
find csrc blosa_kernels python/blosa -type f \
  \( -name '*.cpp' -o -name '*.cu' -o -name '*.h' -o -name '*.cuh' -o -name '*.py' \) \
  | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-12

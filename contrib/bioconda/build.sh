#!/bin/bash
# build.sh - conda-build's build step for esmbatch (meta.yaml): configure,
# make, make install into $PREFIX.  The CUDA build (cuda_compiler_version
# not None) takes nvcc from the build environment and the CUDA runtime and
# cuBLAS from the host prefix, where conda lays them out apart.
set -euxo pipefail

cuda=(--without-cuda)
if [ "${cuda_compiler_version:-None}" != "None" ]; then
	cuda=(--with-cuda="$PREFIX" NVCC="$(command -v nvcc)"
	      --with-cuda-libdir="$PREFIX/lib"
	      --with-cuda-includedir="$PREFIX/targets/x86_64-linux/include"
	      --with-cuda-arch=80,86,89,90)
fi
./configure --prefix="$PREFIX" --disable-dependency-tracking "${cuda[@]}"
make -j"${CPU_COUNT:-1}"
make install

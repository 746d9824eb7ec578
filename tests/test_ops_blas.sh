#!/usr/bin/env bash
# test_ops_blas.sh - test_ops once more with ESMBATCH_CPU_BLAS=1: the CPU
# backend's fallback path (CBLAS products, the plain triangle-product
# loop, attention on CBLAS), which CPUs without AVX-512 run.
# Run by `make check` from the build directory.
ESMBATCH_CPU_BLAS=1 exec ./tests/test_ops

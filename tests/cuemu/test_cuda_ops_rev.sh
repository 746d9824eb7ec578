#!/bin/sh
# test_cuda_ops_rev.sh - tests/test_cuda_ops_emu again with the emulator's
# blocks, warps and lanes in reverse order (CUEMU_REVERSE=1), the second
# fiber schedule.
CUEMU_REVERSE=1 exec ./tests/test_cuda_ops_emu

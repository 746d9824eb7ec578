#!/bin/sh
# skip.sh - stands for the emulated CUDA tests where configure found no CUDA
# toolkit headers (or no C++ compiler): one line, exit 77 (skip).
echo "cuemu: CUDA toolkit headers not found at configure time: emulated CUDA tests skipped"
exit 77

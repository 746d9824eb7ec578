#!/bin/sh
# test_cuemu_rt_early.sh - tests/cuemu/test_cuemu_rt again under the
# early-copies schedule (CUEMU_COPIES_EARLY=1), where a copy at its
# stream's head runs at once: its copy-schedule checks then differ.
CUEMU_COPIES_EARLY=1 exec ./tests/cuemu/test_cuemu_rt

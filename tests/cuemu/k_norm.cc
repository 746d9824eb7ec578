/* k_norm.cc - kernels/norm.cu compiled as C++ for the CUDA emulator (cuemu.h is
 * force-included). */
#include "norm.cu"

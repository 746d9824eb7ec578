/* k_trimul_out.cc - kernels/trimul_out.cu compiled as C++ for the CUDA
 * emulator (cuemu.h is force-included). */
#include "trimul_out.cu"

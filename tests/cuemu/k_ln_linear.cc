/* k_ln_linear.cc - kernels/ln_linear.cu compiled as C++ for the CUDA emulator
 * (cuemu.h is force-included). */
#include "ln_linear.cu"

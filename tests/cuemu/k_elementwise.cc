/* k_elementwise.cc - kernels/elementwise.cu compiled as C++ for the CUDA emulator (cuemu.h is
 * force-included). */
#include "elementwise.cu"

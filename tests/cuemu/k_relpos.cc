/* k_relpos.cc - kernels/relpos.cu compiled as C++ for the CUDA emulator (cuemu.h is
 * force-included). */
#include "relpos.cu"

/* k_attn.cc - kernels/attn.cu compiled as C++ for the CUDA emulator (cuemu.h is
 * force-included). */
#include "attn.cu"

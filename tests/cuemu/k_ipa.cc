/* k_ipa.cc - kernels/ipa.cu compiled as C++ for the CUDA emulator (cuemu.h is
 * force-included). */
#include "ipa.cu"

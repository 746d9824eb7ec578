/* k_transition.cc - kernels/transition.cu compiled as C++ for the CUDA emulator
 * (cuemu.h is force-included). */
#include "transition.cu"

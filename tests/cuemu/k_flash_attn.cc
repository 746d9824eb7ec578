/* k_flash_attn.cc - kernels/flash_attn.cu compiled as C++ for the CUDA emulator
 * (cuemu.h is force-included). */
#include "flash_attn.cu"

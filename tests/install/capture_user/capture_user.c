/* Prints the ABI minor of the header it was compiled with and of the library it loaded: the
 * installed header and library must agree (ctest install.new_c). */
#include <stdio.h>

#include <ssmcheck/ssmcheck_capture.h>

int main(void) {
  printf("header %d library %d\n", SSMC_ABI_MINOR, ssmc_abi_minor());
  return SSMC_ABI_MINOR == ssmc_abi_minor() ? 0 : 1;
}

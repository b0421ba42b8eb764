/* A stand-in for libtpgen-cuda.so in the errors_cuda_module_* tests: an interface hash
 * (FAKE_IFACE: another build's, or this build's) and none of the entry points. */
const char *tpcuda_interface(void);
const char *tpcuda_interface(void) { return FAKE_IFACE; }

/* tpgen info: what this build has and what it sees (no MPI job). */
#include <stdio.h>
#include <unistd.h>

#include "commands.h"
#include "kernels/backend.h"

int tp_cmd_info(int argc, char **argv) {
    (void)argv;
    if (argc > 0) {
        fprintf(stderr, "tpgen: error: `tpgen info` takes no flags\n");
        return 2;
    }
    printf("backends: cpu%s\n", tp_backend_cuda_compiled() ? ", cuda" : "");
    printf("cpu cores: %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
    if (tp_backend_cuda_compiled()) printf("cuda devices: %d\n", tp_backend_cuda_device_count());
    return 0;
}

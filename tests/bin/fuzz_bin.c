/* libFuzzer target for the torch.save reader: the zip parser, the restricted unpickler and the
 * tensor checks, on arbitrary bytes (as a whole archive, and as a bare pickle).
 *   build-X/tests/fuzz_bin -max_total_time=60 CORPUS_DIR   (seed it with the .bin files of tests/bin) */
#include <stddef.h>
#include <stdint.h>

#include "engine/torch_bin.h"
#include "engine/unpickle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    tp_bin_close(tp_bin_open_buffer(data, size, "fuzz", err, sizeof err));
    tp_pickle_dict d;
    if (tp_unpickle_state_dict(data, size, "fuzz", &d, err, sizeof err) == 0) tp_pickle_dict_free(&d);
    return 0;
}

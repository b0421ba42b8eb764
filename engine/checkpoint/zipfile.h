/* Reader for the zip archives torch.save writes (stored entries, ZIP64 when large), on a buffer.
 *
 * The caller owns the bytes (an mmap of the whole file): entries point into them, nothing is
 * copied or decompressed. Only what torch.save (miniz, PyTorchStreamWriter) and Python's zipfile
 * write with ZIP_STORED is accepted: one disk, no encryption, method 0 (stored). Sizes and
 * offsets come from the central directory (torch sets the data-descriptor flag, so the local
 * headers' sizes may be 0); ZIP64 extra fields and the ZIP64 end record are honoured. Every
 * offset and size is bounds-checked against the buffer; CRCs are not verified (that would read
 * every byte, and a rank reads only its own rows). The local headers, one per record spread over
 * the whole file, are all asked for at once (madvise WILLNEED) before any is read: on a cold
 * page cache that turns hundreds of dependent disk reads into one batch.
 *
 * Callable on any memory buffer, so a fuzzer can drive it (tests/fuzz/fuzz_bin.c).
 */
#ifndef TPGEN_ZIPFILE_H
#define TPGEN_ZIPFILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;    /* NUL-terminated copy of the entry's name */
    const uint8_t *data; /* [size] the stored bytes, inside the buffer */
    uint64_t size;
    uint64_t local_offset; /* of its local header */
} tp_zip_entry;

typedef struct {
    tp_zip_entry *entries; /* [n] central-directory order */
    size_t n;
    int zip64; /* 1 when the archive has a ZIP64 end record */
} tp_zip;

/* Parses the archive in buf[0, size). what names it in messages (the file path). Returns 0, or
 * -1 with a message in err ("FILE: truncated zip: ..."). */
int tp_zip_open(tp_zip *z, const uint8_t *buf, size_t size, const char *what, char *err, size_t err_size);
/* The entry called name, or NULL. */
const tp_zip_entry *tp_zip_find(const tp_zip *z, const char *name);
void tp_zip_free(tp_zip *z);

#endif

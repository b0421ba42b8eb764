/* Zip reader for torch.save archives: see zipfile.h. */
#include "zipfile.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ckpt_path.h"
#include "util/log.h"

#define SIG_LOCAL    0x04034b50u
#define SIG_CENTRAL  0x02014b50u
#define SIG_END      0x06054b50u
#define SIG_END64    0x06064b50u
#define SIG_LOC64    0x07064b50u
#define END_SIZE     22 /* end of central directory record, without its comment */
#define LOC64_SIZE   20 /* ZIP64 end locator */
#define END64_SIZE   56 /* ZIP64 end record, without extensible data */
#define CENTRAL_SIZE 46
#define LOCAL_SIZE   30

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* Hint that [p, p + n) will be read soon. Only a hint: on memory that is not a file mapping it
 * fails or does nothing, and either costs nothing, so its status is not checked. */
static void prefetch(const uint8_t *p, size_t n) {
    static uintptr_t page;
    if (!page) page = sysconf(_SC_PAGESIZE) > 0 ? (uintptr_t)sysconf(_SC_PAGESIZE) : 4096;
    uintptr_t start = (uintptr_t)p & ~(page - 1);
    (void)madvise((void *)start, (uintptr_t)p + n - start, MADV_WILLNEED);
}

/* 1 when [off, off + n) lies inside [0, size). */
static int inside(uint64_t off, uint64_t n, size_t size) { return off <= size && n <= size - off; }

/* Reads the ZIP64 extra field of a central entry: replaces the 32-bit fields that hold
 * 0xffffffff by their 64-bit values, in the order the format fixes. */
static int read_zip64_extra(const uint8_t *extra, size_t n, uint64_t *usize, uint64_t *csize, uint64_t *off,
                            const char *what, const char *name, char *err, size_t err_size) {
    for (size_t i = 0; i + 4 <= n;) {
        uint16_t id = rd16(extra + i), len = rd16(extra + i + 2);
        if (i + 4 + len > n)
            return tp_set_err(err, err_size, "%s: corrupt zip: extra field of entry %s overruns", what, name);
        if (id == 1) {
            const uint8_t *p = extra + i + 4, *end = p + len;
            uint64_t *fields[3] = {usize, csize, off};
            for (int k = 0; k < 3; k++) {
                if (*fields[k] != 0xffffffffu) continue;
                if (end - p < 8)
                    return tp_set_err(err, err_size, "%s: corrupt zip: ZIP64 extra field of entry %s is too short", what,
                                name);
                *fields[k] = rd64(p);
                p += 8;
            }
            return 0;
        }
        i += 4 + (size_t)len;
    }
    if (*usize == 0xffffffffu || *csize == 0xffffffffu || *off == 0xffffffffu)
        return tp_set_err(err, err_size, "%s: corrupt zip: entry %s needs a ZIP64 extra field and has none", what, name);
    return 0;
}

int tp_zip_open(tp_zip *z, const uint8_t *buf, size_t size, const char *what, char *err, size_t err_size) {
    memset(z, 0, sizeof *z);
    if (size < END_SIZE) return tp_set_err(err, err_size, "%s: truncated zip: %zu bytes, no end record", what, size);
    /* The end record is the last 22 bytes plus a comment of up to 65535 bytes. */
    size_t lo = size - END_SIZE > 65535 ? size - END_SIZE - 65535 : 0, end = 0;
    int found = 0;
    for (size_t p = size - END_SIZE + 1; p-- > lo;)
        if (rd32(buf + p) == SIG_END && p + END_SIZE + rd16(buf + p + 20) <= size) {
            end = p;
            found = 1;
            break;
        }
    if (!found)
        return tp_set_err(err, err_size,
                    "%s: truncated or corrupt zip: no end-of-central-directory record in the last %zu bytes", what,
                    size - lo);
    const uint8_t *e = buf + end;
    if (rd16(e + 4) != 0 || rd16(e + 6) != 0)
        return tp_set_err(err, err_size, "%s: multi-disk zip archives are not supported", what);
    uint64_t count = rd16(e + 10), cd_size = rd32(e + 12), cd_off = rd32(e + 16);
    if (end >= LOC64_SIZE && rd32(buf + end - LOC64_SIZE) == SIG_LOC64) {
        uint64_t off64 = rd64(buf + end - LOC64_SIZE + 8);
        if (!inside(off64, END64_SIZE, end) || rd32(buf + off64) != SIG_END64)
            return tp_set_err(err, err_size,
                        "%s: corrupt zip: the ZIP64 locator points at byte %llu, not at a ZIP64 end record", what,
                        (unsigned long long)off64);
        const uint8_t *e64 = buf + off64;
        count = rd64(e64 + 32);
        cd_size = rd64(e64 + 40);
        cd_off = rd64(e64 + 48);
        z->zip64 = 1;
    }
    if (!inside(cd_off, cd_size, size))
        return tp_set_err(err, err_size,
                    "%s: truncated zip: central directory at byte %llu (+%llu) is past the end (%zu bytes)", what,
                    (unsigned long long)cd_off, (unsigned long long)cd_size, size);
    if (count > cd_size / CENTRAL_SIZE)
        return tp_set_err(err, err_size, "%s: corrupt zip: %llu entries cannot fit a %llu-byte central directory", what,
                    (unsigned long long)count, (unsigned long long)cd_size);
    z->entries = tp_calloc(count ? count : 1, sizeof *z->entries);
    const uint8_t *c = buf + cd_off, *cend = c + cd_size;
    for (uint64_t i = 0; i < count; i++) {
        if (cend - c < CENTRAL_SIZE || rd32(c) != SIG_CENTRAL) {
            tp_set_err(err, err_size, "%s: corrupt zip: central directory entry %llu is malformed", what,
                 (unsigned long long)i);
            goto bad;
        }
        uint16_t flags = rd16(c + 8), method = rd16(c + 10), nlen = rd16(c + 28), xlen = rd16(c + 30),
                 clen = rd16(c + 32);
        uint64_t csize = rd32(c + 20), usize = rd32(c + 24), loff = rd32(c + 42);
        if ((size_t)(cend - c) < (size_t)CENTRAL_SIZE + nlen + xlen + clen) {
            tp_set_err(err, err_size, "%s: corrupt zip: central directory entry %llu overruns the directory", what,
                 (unsigned long long)i);
            goto bad;
        }
        char *name = tp_malloc((size_t)nlen + 1);
        memcpy(name, c + CENTRAL_SIZE, nlen);
        name[nlen] = 0;
        tp_zip_entry *ze = &z->entries[z->n++];
        ze->name = name;
        if (strlen(name) != nlen) {
            tp_set_err(err, err_size, "%s: corrupt zip: an entry name contains a NUL byte", what);
            goto bad;
        }
        if (read_zip64_extra(c + CENTRAL_SIZE + nlen, xlen, &usize, &csize, &loff, what, name, err, err_size)) goto bad;
        if (flags & 1) {
            tp_set_err(err, err_size, "%s: entry %s is encrypted", what, name);
            goto bad;
        }
        if (method != 0 || csize != usize) {
            tp_set_err(err, err_size,
                 "%s: entry %s is compressed (method %u); torch.save stores entries uncompressed, "
                 "and tpgen reads only stored entries",
                 what, name, method);
            goto bad;
        }
        ze->size = usize;
        ze->local_offset = loff;
        if (inside(loff, LOCAL_SIZE, size)) prefetch(buf + loff, LOCAL_SIZE);
        c += CENTRAL_SIZE + nlen + xlen + clen;
    }
    for (size_t i = 0; i < z->n; i++) { /* the local headers, now that all are on their way */
        tp_zip_entry *ze = &z->entries[i];
        const char *name = ze->name;
        uint64_t loff = ze->local_offset, usize = ze->size;
        if (!inside(loff, LOCAL_SIZE, size) || rd32(buf + loff) != SIG_LOCAL) {
            tp_set_err(err, err_size, "%s: %s zip: entry %s: no local header at byte %llu", what,
                 inside(loff, LOCAL_SIZE, size) ? "corrupt" : "truncated", name, (unsigned long long)loff);
            goto bad;
        }
        uint64_t data = loff + LOCAL_SIZE + rd16(buf + loff + 26) + rd16(buf + loff + 28);
        if (!inside(data, usize, size)) {
            /* the sizes come from the central directory: a cut file or a corrupt entry (a ZIP64
             * size can make data + usize wrap: say the size, not the sum) */
            tp_set_err(err, err_size,
                 "%s: truncated or corrupt zip: entry %s: %llu bytes from byte %llu run past the end of the file "
                 "(%zu bytes)",
                 what, name, (unsigned long long)usize, (unsigned long long)data, size);
            goto bad;
        }
        ze->data = buf + data;
    }
    return 0;
bad:
    tp_zip_free(z);
    return -1;
}

const tp_zip_entry *tp_zip_find(const tp_zip *z, const char *name) {
    for (size_t i = 0; i < z->n; i++)
        if (strcmp(z->entries[i].name, name) == 0) return &z->entries[i];
    return NULL;
}

void tp_zip_free(tp_zip *z) {
    for (size_t i = 0; i < z->n; i++) free((char *)z->entries[i].name);
    free(z->entries);
    memset(z, 0, sizeof *z);
}

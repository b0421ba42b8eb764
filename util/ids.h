/* Token-id lists as users write them ("5,17,9"), parsed where ids enter tpgen (flags, prompt
 * files; the server's requests later). Every number is read in full, beyond 64 bits if need be,
 * and checked against the limit (vocab_size) before it becomes an int32: "3000000000" is an
 * error naming "3000000000", never a negative id, never 1 for "4294967297". */
#ifndef TPGEN_UTIL_IDS_H
#define TPGEN_UTIL_IDS_H

#include <stddef.h>
#include <stdint.h>

/* s[0..len): ids separated by commas, spaces around them allowed; an empty item ("1,,2",
 * "1,2,") is an error. Every id must be < limit (0 < limit <= INT32_MAX + 1; the message
 * calls it vocab_size). where names the source in messages ("--prompt-ids", "FILE line 3").
 * Returns 0 with *ids (malloc'd, caller frees) and *n >= 1, or -1 with the message in err
 * (*ids NULL). */
int tp_ids_parse_list(const char *s, size_t len, int64_t limit, const char *where, int32_t **ids, int *n, char *err,
                      size_t err_size);

/* Checks one id already read as a number (a JSON integer): 0 when 0 <= id < limit, else -1
 * with "token id X at position P of WHERE is >= vocab_size L" (or "is negative") in err. */
int tp_ids_check(int64_t id, int64_t limit, int pos, const char *where, char *err, size_t err_size);

#endif

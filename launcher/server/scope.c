/* A job's prefix-cache scope (engine/sched/prefix_cache.h, tp_cache_scope): SHA-256 (OpenSSL's
 * libcrypto) of the scope's kind, its API key or request serial, and its cache_salt's own digest,
 * each field of fixed size or length-prefixed, so that two scopes are equal only when their keys
 * and salts are (a 64-bit FNV-1a digest here let colliding salts and keys share blocks: issue 41). */
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "util/log.h"

void srv_sha256(const void *data, size_t n, uint8_t out[32]) {
    unsigned len = 0;
    /* EVP_Digest: one-shot, no state kept; fails only when libcrypto cannot allocate */
    if (EVP_Digest(data, n, out, &len, EVP_sha256(), NULL) != 1 || len != 32)
        tp_die("launcher/server/scope.c:%d: EVP_Digest(SHA-256) failed", __LINE__);
}

/* appends n bytes at *p (the buffer sized by the caller) */
static uint8_t *put(uint8_t *p, const void *s, size_t n) {
    memcpy(p, s, n);
    return p + n;
}

void srv_job_scope(const tp_server *s, const srv_job *j, uint64_t serial, tp_cache_scope *out) {
    memset(out, 0, sizeof *out);
    uint8_t kind = 0; /* 0: the common scope (shared, or key without keys), 1: an API key's, 2: one request's */
    const char *key = NULL;
    if (s->o.prefix_scope == TP_PREFIX_SCOPE_REQUEST) kind = 2;
    else if (s->o.prefix_scope == TP_PREFIX_SCOPE_KEY && j->api_key >= 0 && j->api_key < s->o.n_api_keys) {
        kind = 1;
        key = s->o.api_keys[j->api_key];
    }
    if (kind == 0 && !j->has_salt) return; /* all zero, as `tpgen generate`'s */
    static const char tag[] = "tpgen prefix-cache scope 1";
    uint64_t key_len = key ? strlen(key) : 0;
    size_t n = sizeof tag + 1 + 8 + (size_t)key_len + 8 + 1 + 32;
    uint8_t *msg = tp_malloc(n), *p = msg;
    p = put(p, tag, sizeof tag);
    p = put(p, &kind, 1);
    p = put(p, &key_len, 8);
    if (key) p = put(p, key, key_len);
    uint64_t req = kind == 2 ? serial : 0;
    p = put(p, &req, 8);
    uint8_t salted = (uint8_t)j->has_salt;
    p = put(p, &salted, 1);
    p = put(p, j->salt_digest, 32);
    srv_sha256(msg, (size_t)(p - msg), out->b);
    free(msg);
}

/* Request framing (RFC 9112 section 6), checked on the headers before the body is read.
 * libmicrohttpd 0.9.75 takes a header whose name is followed by a space ("Content-Length : 5") as
 * an unknown header, so the body was read as the next request (smuggled); it takes the first of
 * two Content-Length headers; and with a Transfer-Encoding other than chunked it waits for a
 * body that has no length. Every request is checked here, before its body is read, and refused
 * with the connection closed: a server that cannot tell where a request ends must not read on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

typedef struct {
    int n_cl, n_te, n_host, bad_name;
    char name[64];           /* the first bad header name, for the message */
    const char *cl, *te;     /* the values */
} framing;

static int is_tchar(unsigned char ch) { /* RFC 9110 section 5.6.2 */
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                      const char *value, size_t value_size) {
    (void)kind;
    (void)value_size;
    framing *f = cls;
    int bad = key_size == 0;
    for (size_t i = 0; i < key_size; i++) bad |= !is_tchar((unsigned char)key[i]);
    if (bad && !f->bad_name++) snprintf(f->name, sizeof f->name, "%.*s", (int)(key_size < 60 ? key_size : 60), key);
    if (!bad && strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) f->n_cl++, f->cl = value;
    if (!bad && strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) f->n_te++, f->te = value;
    if (!bad && strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) f->n_host++;
    return MHD_YES;
}

/* 0 when the framing is sound, else the status to refuse with (400, or 501 for a transfer coding
 * tpgen does not implement) and why in msg. *has_body: a body follows the headers. */
int srv_framing_error(struct MHD_Connection *c, const char *version, int *has_body, long long *cl, char *msg,
                      size_t msg_size) {
    framing f = {0};
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, framing_header, &f);
    *has_body = 0;
    *cl = -1;
    if (f.bad_name) {
        /* the name as sent; a control character in it is shown escaped by the JSON writer */
        snprintf(msg, msg_size, "malformed header name \"%s\" (a token, no space before the colon: RFC 9112 5.1)",
                 f.name);
        return 400;
    }
    /* libmicrohttpd's own check (MHD_OPTION_STRICT_FOR_CLIENT) sends its 400 head twice in 0.9.75 */
    if (f.n_host > 1 || (f.n_host == 0 && strcmp(version, MHD_HTTP_VERSION_1_1) == 0)) {
        snprintf(msg, msg_size, "%s Host header; an HTTP/1.1 request has exactly one (RFC 9112 3.2)",
                 f.n_host ? "more than one" : "no");
        return 400;
    }
    if (f.n_cl > 1) {
        snprintf(msg, msg_size, "%d Content-Length headers; a request has at most one (RFC 9112 6.3)", f.n_cl);
        return 400;
    }
    if (f.n_te && f.n_cl) {
        snprintf(msg, msg_size, "both Transfer-Encoding and Content-Length; a request has one or the other (RFC 9112 6.1)");
        return 400;
    }
    if (f.n_te) {
        const char *v = f.te;
        while (*v == ' ' || *v == '\t') v++;
        size_t n = strlen(v);
        while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
        if (f.n_te > 1 || n != 7 || strncasecmp(v, "chunked", 7)) {
            /* a coding other than chunked (gzip, ...): not implemented; chunked not last: no length */
            const char *last = f.te + strlen(f.te);
            while (last > f.te && (last[-1] == ' ' || last[-1] == '\t')) last--;
            int chunked_last = f.n_te == 1 && last - f.te >= 7 && strncasecmp(last - 7, "chunked", 7) == 0;
            snprintf(msg, msg_size, "Transfer-Encoding \"%.64s\"%s: tpgen takes only \"chunked\" (RFC 9112 6.1)",
                     f.n_te > 1 ? "(several headers)" : f.te, chunked_last ? " has a coding it does not implement" : "");
            return chunked_last ? 501 : 400;
        }
        *has_body = 1;
    }
    if (f.n_cl) { /* libmicrohttpd has refused a value that is not a number (400) or too large (413) */
        size_t nd = strspn(f.cl, "0123456789"); /* 1*DIGIT, nothing else (RFC 9110 8.6) */
        long long x = nd ? strtoll(f.cl, NULL, 10) : -1;
        if (!nd || f.cl[nd] || x < 0) {
            snprintf(msg, msg_size, "Content-Length \"%.32s\" is not a length", f.cl);
            return 400;
        }
        *cl = x;
        *has_body = x > 0;
    }
    return 0;
}

/* The request line and headers are in, no byte of the body is read: everything that can be
 * decided now is (framing, route, method, API key, size), so a request that will be refused
 * never has its body buffered. Returns MHD_YES to read the body (the route answers at its end). */

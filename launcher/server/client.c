/* Who the client of a request is: the unit of --max-seqs-per-client and of fair admission. It is
 * the peer's address, unless the peer is a --trusted-proxy (a load balancer in front of several
 * replicas, docs/SERVING.md "Replicas behind a load balancer"): then every request would come
 * from the balancer's one address and share one client's limits, so the client is the address
 * the balancer saw, which it appends to X-Forwarded-For (HAProxy's `option forwardfor`). Only the
 * last entry is read: the ones before it came from the client and anyone can write them. A
 * header from any other peer is ignored, or a client could pick its own identity and escape its
 * limits. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "route.h"

int srv_canonical_address(const char *text, char *out, size_t size) {
    unsigned char bin[sizeof(struct in6_addr)];
    int af = inet_pton(AF_INET, text, bin) == 1 ? AF_INET : inet_pton(AF_INET6, text, bin) == 1 ? AF_INET6 : 0;
    if (!af || !inet_ntop(af, bin, out, (socklen_t)size)) return -1;
    /* an IPv4 client of a dual-stack socket reads ::ffff:a.b.c.d: the same client as a.b.c.d */
    if (af == AF_INET6 && !strncasecmp(out, "::ffff:", 7) && strchr(out, '.')) memmove(out, out + 7, strlen(out + 7) + 1);
    return 0;
}

static void peer_address(struct MHD_Connection *c, char *out, size_t size) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(out, size, "?");
    if (!ci || !ci->client_addr) return;
    socklen_t len = ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    char host[NI_MAXHOST];
    if (getnameinfo(ci->client_addr, len, host, sizeof host, NULL, 0, NI_NUMERICHOST) ||
        srv_canonical_address(host, out, size))
        snprintf(out, size, "?");
}

/* The value of the last X-Forwarded-For header line (a proxy appends its line after the client's). */
static enum MHD_Result last_xff(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    if (key && value && !strcasecmp(key, "X-Forwarded-For")) *(const char **)cls = value;
    return MHD_YES;
}

void srv_client_address(tp_server *s, struct MHD_Connection *c, char *out, size_t size) {
    peer_address(c, out, size);
    int trusted = 0;
    for (int i = 0; i < s->o.n_trusted_proxies && !trusted; i++) trusted = !strcmp(out, s->o.trusted_proxies[i]);
    if (!trusted) return;
    const char *xff = NULL;
    MHD_get_connection_values(c, MHD_HEADER_KIND, last_xff, &xff);
    if (!xff) return; /* the proxy's own request (a health check), or one it did not mark */
    const char *last = strrchr(xff, ',');
    last = last ? last + 1 : xff;
    char entry[INET6_ADDRSTRLEN + 8];
    while (*last == ' ' || *last == '\t') last++;
    size_t n = strcspn(last, " \t");
    if (n >= sizeof entry) return;
    memcpy(entry, last, n);
    entry[n] = 0;
    char client[INET6_ADDRSTRLEN];
    /* not an address (a proxy that writes "unknown" or a port): the proxy stays the client */
    if (srv_canonical_address(entry, client, sizeof client)) return;
    snprintf(out, size, "%s", client);
}

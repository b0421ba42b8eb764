/* The routes tpgen serves: one row each (route.h says what a row means, http.c applies it), and
 * the small handlers answered on the headers. Every row has its entry in docs/SERVING.md,
 * "Routes" (the ctest server_routes_documented fails otherwise). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "route.h"

static enum MHD_Result route_health(tp_server *s, struct MHD_Connection *c, srv_req *rq) {
    pthread_mutex_lock(&s->mu);
    int ready = s->ready, draining = s->draining || srv_stop_signal; /* the signal counts at once */
    pthread_mutex_unlock(&s->mu);
    jbuf b = {0};
    jb_printf(&b, "{\"status\": \"%s\"}", draining ? "draining" : ready ? "ok" : "loading");
    return srv_send(s, c, rq, ready && !draining ? 200 : 503, "application/json", &b, 0);
}

static enum MHD_Result route_metrics(tp_server *s, struct MHD_Connection *c, srv_req *rq) {
    jbuf b = {0};
    pthread_mutex_lock(&s->mu);
    s->met.detok_held = (long)s->detok_held;
    srv_metrics_render(&s->met, &b);
    pthread_mutex_unlock(&s->mu);
    return srv_send(s, c, rq, 200, "text/plain; version=0.0.4", &b, 0);
}

static enum MHD_Result route_models(tp_server *s, struct MHD_Connection *c, srv_req *rq) {
    jbuf b = {0};
    jb_str(&b, "{\"object\": \"list\", \"data\": [{\"id\": ");
    jb_json(&b, s->o.name, strlen(s->o.name));
    jb_printf(&b, ", \"object\": \"model\", \"created\": %ld, \"owned_by\": \"tpgen\", \"root\": ", (long)time(NULL));
    jb_json(&b, s->o.name, strlen(s->o.name));
    if (s->ready) jb_printf(&b, ", \"max_model_len\": %d}]}", s->n_positions);
    else jb_str(&b, ", \"max_model_len\": null}]}");
    return srv_send(s, c, rq, 200, "application/json", &b, 1);
}

/* GET /copilot_internal/v2/token: the Copilot editor plugin asks for a session token before it
 * completes, and sends it back as 'Authorization: Bearer TOKEN'. The shape FauxPilot answers:
 * {"token": str, "expires_at": unix seconds, "refresh_in": seconds}. The route is behind the API
 * key like every other (checked before this runs); with a key the token is that key, so the
 * plugin's completions pass the same check; without one it is "1", as FauxPilot's. Expiry: an
 * hour from now, refreshed every 15 min (FauxPilot: 2600000000 and 900), so a restarted server's
 * new key reaches the plugin within 15 minutes. */
static enum MHD_Result route_copilot_token(tp_server *s, struct MHD_Connection *c, srv_req *rq) {
    int which = srv_api_key_of(s, c); /* the caller's own key (checked before this runs) */
    const char *key = which >= 0 ? s->o.api_keys[which] : "1";
    jbuf b = {0};
    jb_str(&b, "{\"token\": ");
    jb_json(&b, key, strlen(key));
    jb_printf(&b, ", \"expires_at\": %lld, \"refresh_in\": 900}", (long long)time(NULL) + 3600);
    return srv_send(s, c, rq, 200, "application/json", &b, 1);
}

/* A new route: a row here, its handler, and its entry in docs/SERVING.md ("Routes"). The order of
 * the rows does not matter (no path matches two patterns). */
const srv_route srv_routes[] = {
    /* method  path                                handler                body limit          auth  admit */
    {"GET",  "/health",                           route_health,          SRV_NO_BODY,        0, NULL},
    {"GET",  "/metrics",                          route_metrics,         SRV_NO_BODY,        0, NULL},
    {"GET",  "/v1/models",                        route_models,          SRV_NO_BODY,        1, NULL},
    {"GET",  "/copilot_internal/v2/token",        route_copilot_token,   SRV_NO_BODY,        1, NULL},
    {"POST", "/v1/completions",                   srv_route_completions, SRV_BODY_MAX,       1, NULL},
    {"POST", "/v1/engines/{engine}/completions",  srv_route_completions, SRV_BODY_MAX,       1, NULL},
    {"POST", "/tokenize",                         srv_route_tokenize,    SRV_BODY_MAX,       1, NULL},
    {"POST", "/detokenize",                       srv_route_detokenize,  SRV_DETOK_MAX_BODY, 1, srv_detok_admit},
};
const int srv_n_routes = (int)(sizeof srv_routes / sizeof *srv_routes);

int srv_path_match(const char *pattern, const char *path) {
    for (;;) {
        if (*pattern == '{') { /* one non-empty segment */
            pattern = strchr(pattern, '}');
            if (!pattern) return 0;
            pattern++;
            size_t seg = strcspn(path, "/");
            if (!seg) return 0;
            path += seg;
            continue;
        }
        if (*pattern != *path) return 0;
        if (!*pattern) return 1;
        pattern++, path++;
    }
}

const char *srv_route_hint(const char *path) {
    /* docs/SERVING.md, "Routes": why there is no chat route */
    if (strcmp(path, "/v1/chat/completions") == 0)
        return "tpgen serves the completions API only (POST /v1/completions with a \"prompt\"); the CodeGen models "
               "it runs are not chat models and have no chat template";
    return NULL;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuop device-plugin`'s shell, shared by its files: device-plugin-main.c (the options, the
 * plan built and swapped, the main loop), dp-server.c (one gRPC server per resource and its
 * handlers, ListAndWatch broadcasts), dp-kubelet.c (registration with the kubelet and the watch
 * of its directory), dp-health-thread.c (NVML events and lost GPUs) and dp-cdi-file.c (the CDI
 * spec of a cdi-* strategy).
 *
 * Threads: main (signals, inotify on the kubelet's directory, registration and its retries,
 * reloads), one gRPC loop thread per advertised resource (handlers), and the health thread
 * (NVML events, lost-GPU checks, recovery). `mu` guards the plan and the watcher lists; `send_mu`
 * orders ListAndWatch sends so a stream never receives an older list after a newer one. The
 * main thread never holds `mu` while stopping a server (its close callbacks take `mu`).
 */
#ifndef GPUOP_DP_SHELL_H
#define GPUOP_DP_SHELL_H

#include <limits.h>
#include <pthread.h>

#include "dp-internal.h"
#include "grpc.h"

#define DP_COMP           "device-plugin"
#define DP_MAX_WATCH      16
#define DP_BACKOFF_MIN_MS 250
#define DP_BACKOFF_MAX_MS 30000

struct plugin;

struct dp_flags {
    const char *kubelet_socket;
    const char *socket_suffix; /* --socket-suffix: nvidia-gpu-WORD.sock */
    const char *cdi_root;
    const char *cdi_kind;
    uint64_t recovery_ms;
    const char *disable_hc, *enable_hc;
};

/* One advertised resource's server. */
struct dp_srv {
    struct plugin *pl;
    char resource[DP_NAME_MAX];
    char socket_path[PATH_MAX];
    char socket_name[DP_NAME_MAX];
    struct grpc_server *srv;
    struct grpc_stream *watch[DP_MAX_WATCH];
    size_t n_watch;
    bool registered;
};

struct plugin {
    struct dpconfig_layer_state layer; /* first: svc's config-file layer works on it */
    struct dp_flags flags;
    struct dp_options opts; /* from the config at start */
    bool fail_init;
    struct stop_token *stop; /* svc's */
    int ifd;                 /* inotify on the kubelet's directory */
    pthread_mutex_t mu;
    pthread_mutex_t send_mu;
    struct dp_plan *plan;
    struct dp_srv *srv;
    size_t n_srv;
    char dir[PATH_MAX];
    char kubelet_sock[PATH_MAX];
    const char *kubelet_name;
    bool no_register;
    struct gh_policy hp;
    uint64_t recovery_ms;
    struct gpu_lib *lib;
    /* registration retry */
    uint64_t next_retry_ms;
    uint64_t backoff_ms;
    /* health thread */
    pthread_t health;
    bool health_running;
    struct gpu_events *health_ev; /* opened before serving, the thread's once it runs */
};

/* ---- dp-server.c (main thread, but for the handlers and dp_broadcast) --------------------- */

/* A server per resource of the plan on <dir>/<socket>; on failure none is left. */
int dp_servers_start(struct plugin *pl, struct err *e);
void dp_servers_stop(struct plugin *pl);
/* Sends the current list of every resource to every watcher (any thread). */
void dp_broadcast(struct plugin *pl);
/* Whether a host path exists (Allocate's and the CDI spec's optional device nodes). */
bool dp_host_path_exists(const char *path, void *ud);

/* ---- dp-kubelet.c (main thread) ----------------------------------------------------------- */

/* Registers every unregistered server; schedules a retry with backoff when one fails. */
void dp_register_all(struct plugin *pl);
/* inotify on the kubelet's directory, before the first socket, so no event is missed. */
int dp_watch_open(struct plugin *pl, struct err *e);
/* Reads the inotify events; true when the servers must restart (kubelet.sock re-created, one of
 * ours removed, or events lost). */
bool dp_watch_wants_restart(struct plugin *pl);

/* ---- dp-health-thread.c ------------------------------------------------------------------- */

/* The health thread, started where NVML is loaded; stopped with the stop token. */
void dp_health_start(struct plugin *pl);
void dp_health_join(struct plugin *pl);

/* ---- dp-cdi-file.c (main thread) ---------------------------------------------------------- */

/* Under a CDI device-list strategy, the spec that defines the names Allocate hands out: written
 * (atomically) when it changes, removed when no device is left or another spec defines them. A
 * failure is logged: the runtime then fails such containers, naming the device. */
void dp_cdi_spec_write(struct plugin *pl);

#endif

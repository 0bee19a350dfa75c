/* SPDX-License-Identifier: Apache-2.0 */
/* The validator's shell, shared by its files: the options (validator-main.c), the probes that
 * gather what a check asks for (probes.c) and the API server's side (node-api.c). */
#ifndef GPUOP_VALIDATOR_INTERNAL_H
#define GPUOP_VALIDATOR_INTERNAL_H

#include <jansson.h>

#include "svc.h"
#include "validator.h"

struct kube_client;

struct val {
    int component; /* enum val_component */
    bool wait;
    bool once;           /* all-done: exit once checked (a readiness probe) */
    bool without_plugin; /* all-done: no plugin-ready needed */
    const char *host_root;
    const char *driver_root;
    const char *validations_dir;
    const char *node_name;
    const char *ns;
    const char *kubeconfig;
    const char *driver_version;
    const char *mig_strategy;
    const char *sysfs_root;
    const char *nvml_library;
    const char *cuda_library;
    uint64_t interval_ms;
    uint64_t timeout_ms;
    /* resolved at configure */
    struct val_config cfg;
    char sysfs[PATH_MAX];
    /* run state */
    struct kube_client *kc; /* NULL: no API server (no --node-name) */
};

/* ---- options.c: the component's options and their defaults (state: a struct val) ---- */
extern const struct svc_option val_options[];
void val_defaults(void *state);

/* ---- node-api.c: Events and annotations on the node, DaemonSets, the driver pod, the Node.
 * Without an API client each is a no-op (false, NULL); an API error is logged. */

/* Opens the client when --node-name is set; only the plugin check fails without one. */
int val_api_open(struct val *v, struct stop_token *stop, struct err *e);
void val_api_close(void *state); /* the component's cleanup: state is a struct val */
void val_api_event(struct val *v, bool warning, const char *reason, const char *msg);
/* validation.gpuop.dev/<component>: state with reason (NULL when ok), stamped now. */
void val_api_annotate(struct val *v, enum nodestate_vstate state, const char *reason);
/* gpuop.dev/driver-owner, stamped now. */
void val_api_record_owner(struct val *v, struct nodestate_driver_owner *o);
bool val_api_daemonset_exists(struct val *v, const char *selector);
/* This node's pod of the DaemonSets matching selector; NULL when none or on an API error. */
json_t *val_api_driver_pod(struct val *v, const char *selector);
int val_api_node(struct val *v, json_t **ret, struct err *e);

/* ---- probes.c: the facts a check asks for ------------------------------------------------- */

/* The facts of one try and the memory they point into. */
struct val_gathered {
    struct val_facts f;
    char *driver_ready, *ctr_ready, *marker;
    struct cdi_spec *spec;
    struct gpu_inventory *inv;
    struct nodestate_gpus gpus;
    json_t *driver_pod, *node;
};
void val_gathered_clear(struct val_gathered *g);
/* Runs the probe st asks for and records it in g->f (have[] set; a failure in fail[]). */
void val_probe_run(struct val *v, const struct val_step *st, struct val_gathered *g);

/* An inotify descriptor on the status folder for the checks that read only status files
 * (all-done, the toolkit-ready wait), so a file written there wakes the wait at once; -1 for the
 * other checks, or when inotify is not available (the wait then polls every --interval). */
int val_status_watch(const struct val *v);
/* Sleeps up to ms, or until the status folder changes (ifd >= 0), a stop or a reload. */
enum svc_wake val_status_wait(struct svc *s, int ifd, uint64_t ms);

#endif

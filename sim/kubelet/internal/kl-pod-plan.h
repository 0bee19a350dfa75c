/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-pod-plan: the pure parts of the pod workers (kl-pods.h).
 *
 *  - kl_pod_plan (pod-plan.c): the kubelet's decisions for one pod. The pod object and what the
 *    worker observed of its containers (runtime state, image pulls, probe results, backoff) and
 *    the time in; the actions to take now (pull, start, run a preStop hook, kill, probe, delete
 *    the pod object), when to look again, Events and the pod status as the kubelet writes it
 *    out. No I/O, no clock.
 *  - the spec builders (pod-spec.c): image to program, env resolution (fieldRef,
 *    resourceFieldRef, ConfigMap and Secret references through injected lookups, $(VAR)
 *    expansion), volume materialisation into the pod's folder, and a container's argv, env and
 *    mounts. They write files (volumes) but read the API only through the lookups.
 *
 * Times are Unix milliseconds (status timestamps are wall-clock, as the kubelet's are).
 * Thread-safety: none needed; every call works on its own arguments.
 */
#ifndef GPUOP_KL_POD_PLAN_H
#define GPUOP_KL_POD_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kl-runtime.h"
#include "util.h"

/* ---- observations ------------------------------------------------------------------------ */

enum kl_probe_kind { KL_PROBE_STARTUP, KL_PROBE_READINESS, KL_PROBE_LIVENESS, KL_PROBE_N };
enum kl_probe_result { KL_PROBE_UNKNOWN, KL_PROBE_SUCCESS, KL_PROBE_FAILURE };

/* A prober worker's state, as the kubelet's keeps it: consecutive counts and the result they
 * give under the probe's thresholds. Reset when the container restarts. */
struct kl_probe_state {
    unsigned successes, failures; /* consecutive */
    uint64_t last_ms;             /* last run, 0: never */
    enum kl_probe_result result;
};

enum kl_ctr_phase {
    KL_CTR_CREATED_NOT, /* never started (this attempt) */
    KL_CTR_RUNNING,
    KL_CTR_EXITED,
};

struct kl_ctr_termination {
    int exit_code;
    bool oom_killed;
    const char *reason;  /* NULL: from the exit code (Completed / Error / OOMKilled) */
    const char *message; /* NULL: none (terminationMessagePolicy FallbackToLogsOnError: log tail) */
    uint64_t started_ms, finished_ms;
    const char *container_id;
};

struct kl_ctr_obs {
    enum kl_ctr_phase phase;
    uint64_t started_ms;              /* RUNNING, EXITED */
    struct kl_ctr_termination exited; /* EXITED */
    bool killing;                     /* a kill is in progress */
    bool prestop_done;                /* the preStop hook ran (deletion) */
    unsigned restart_count;
    bool has_last;
    struct kl_ctr_termination last; /* the attempt before the current one */
    const char *container_id;       /* "containerd://<hex>" of the current (or last) attempt */
    /* image */
    bool pulled;
    const char *image_id;
    const char *pull_error; /* the last pull's failure, NULL when it worked or none ran */
    unsigned pull_failures;
    uint64_t last_pull_ms;
    /* creation (devices, CDI, mounts, exec): the last attempt's failure */
    const char *create_error;
    const char *create_reason; /* NULL: CreateContainerError (CreateContainerConfigError...) */
    unsigned create_failures;
    uint64_t last_create_ms;
    /* restart backoff, as the kubelet's flowcontrol.Backoff entry for the container */
    uint64_t backoff_ms;         /* the entry's current delay, 0: none */
    uint64_t backoff_updated_ms; /* when it was last raised (the last restart) */
    struct kl_probe_state probes[KL_PROBE_N];
};

struct kl_pod_obs {
    const struct kl_ctr_obs *init; /* one per spec.initContainers, in order */
    size_t n_init;
    const struct kl_ctr_obs *ctrs; /* one per spec.containers */
    size_t n_ctrs;
    bool sandbox_ready;        /* volumes set up: containers may start */
    const char *mount_error;   /* volume setup failed (the FailedMount message) */
    uint64_t admitted_ms;      /* when the worker first saw the pod (status.startTime) */
    uint64_t deletion_seen_ms; /* when the worker saw deletionTimestamp (or the removal), 0 */
    bool removed;              /* the object is gone from the API (force delete) */
    const char *host_ip, *pod_ip;
};

struct kl_plan_config {
    uint64_t backoff_base_ms; /* 0: 10000 */
    uint64_t backoff_max_ms;  /* 0: 300000 */
};

/* ---- plan -------------------------------------------------------------------------------- */

enum kl_action_kind {
    KL_ACT_PULL,    /* resolve the container's image (kl_image_resolve) */
    KL_ACT_START,   /* create and start the container; backoff_ms: the entry to keep */
    KL_ACT_PRESTOP, /* run the preStop hook, bounded by grace_ms */
    KL_ACT_KILL,    /* SIGTERM, grace_ms, SIGKILL; reason/message for the Killing Event */
    KL_ACT_PROBE,   /* run probe `probe` once, then kl_probe_record */
};

struct kl_action {
    enum kl_action_kind kind;
    bool init;    /* an init container */
    size_t index; /* in spec.initContainers or spec.containers */
    const char *name;
    enum kl_probe_kind probe;
    uint64_t grace_ms;
    uint64_t backoff_ms; /* START: the container's backoff entry after this restart */
    char *message;       /* KILL: the Killing Event's message (owned by the plan) */
};

struct kl_plan_event {
    char *type, *reason, *message;
    char *field_path; /* "spec.containers{x}", or NULL */
};

struct kl_pod_plan {
    struct kl_action *actions;
    size_t n_actions;
    struct kl_plan_event *events;
    size_t n_events;
    json_t *status;   /* the pod's status as the kubelet writes it (owned) */
    uint64_t wake_ms; /* look again at this time (UINT64_MAX: only on a change) */
    bool terminal;    /* Succeeded or Failed: nothing will run again; release devices */
    bool delete_pod;  /* deletion finished: write the status, then delete with grace 0 */
    bool all_stopped; /* no container runs nor is being killed */
    char *qos_class;  /* the status's qosClass */
};

void kl_pod_plan_clear(struct kl_pod_plan *p);

/* The kubelet's sync of one pod. prev_status is the status the API holds (lastTransitionTime
 * and startTime kept from it when unchanged). -EINVAL for a pod without containers. */
int kl_pod_plan(const json_t *pod, const struct kl_pod_obs *obs, const struct kl_plan_config *cfg,
                uint64_t now_ms, struct kl_pod_plan *ret, struct err *e);

/* Applies one probe run to its state under the probe's successThreshold/failureThreshold. */
void kl_probe_record(struct kl_probe_state *s, const json_t *probe, bool success, uint64_t now_ms);
/* The initial state of a probe of a new container (readiness: failure until it succeeds,
 * liveness: success, startup: unknown). */
void kl_probe_init(struct kl_probe_state *s, enum kl_probe_kind kind);
const char *kl_probe_kind_name(enum kl_probe_kind k); /* "Startup", "Readiness", "Liveness" */
/* The probe object of a container ("startupProbe", ...), or NULL. */
const json_t *kl_probe_spec(const json_t *container, enum kl_probe_kind kind);

/* Go's time.Duration.String() of whole milliseconds: "10s", "1m20s", "5m0s", "100ms". */
void kl_go_duration(uint64_t ms, char *buf, size_t n);

/* The termination message a failed container gets under terminationMessagePolicy
 * FallbackToLogsOnError: the last 80 lines of its log, of those the last 2048 bytes (the kubelet's
 * limits). NULL for an empty log. */
char *kl_log_tail_message(const char *log, size_t n);

/* BestEffort, Burstable or Guaranteed, as the API server and kubelet compute it. */
const char *kl_pod_qos_class(const json_t *pod);

/* ---- spec builders (pod-spec.c) ---------------------------------------------------------- */

/* The program a container image runs. entrypoint: the image's own (used when the container
 * gives no command); NULL-terminated argv. -ENOENT with the pull failure's message
 * ("rpc error: code = NotFound desc = failed to pull and unpack image ...") for an image that
 * is not simulated. */
struct kl_image {
    char *ref;          /* normalised: docker.io/library/gpuop:latest */
    char *image_id;     /* <repo>@sha256:<hex> */
    char *entrypoint;   /* the program, as the container sees it: gpuop at its own path
                         * (its folder is bound there), the simulated images' programs under
                         * KL_SIM_BIN_MOUNT */
    char *command_name; /* the name its command uses ("gpuop", "nvidia-driver") */
};
void kl_image_clear(struct kl_image *im);
int kl_image_resolve(const char *image, const char *gpuop_exe, struct kl_image *ret, struct err *e);
/* The program a container's command, or an exec probe's, runs: the image's own when arg0 names
 * it (by base name: "gpuop", "/usr/bin/gpuop"), else arg0 as given. */
const char *kl_image_program(const struct kl_image *im, const char *arg0);
/* "docker.io/library/x:latest" for "x", as containerd names a reference. Caller frees. */
char *kl_image_normalise(const char *image);

#define KL_SIM_BIN_MOUNT "/opt/gpuop-sim/bin"
#define KL_SA_MOUNT      "/var/run/secrets/kubernetes.io/serviceaccount"

/* The API objects a spec reads: 0 and a new reference, -ENOENT when absent, another code on
 * failure (with e set). */
typedef int (*kl_get_object_fn)(void *ud, const char *ns, const char *name, json_t **ret,
                                struct err *e);

struct kl_spec_input {
    const json_t *pod;
    const char *node_root;
    const char *host_ip, *pod_ip;
    uint64_t node_cpu_milli, node_memory_bytes; /* allocatable: the default of limits */
    const char *gpuop_exe, *sim_image_bin;
    const char *const *sim_env; /* "K=V", NULL-terminated; may be NULL */
    /* host paths the simulated hardware needs in every container at the same path (the fleet
     * file read-only, the node root read-write: NVML's state, the driver's module files) */
    const char *const *sim_paths;
    const char *api_host, *api_port;
    const char *sa_token;  /* the service-account token (NULL: none) */
    const char *sa_ca_pem; /* the API server's CA (NULL: none) */
    kl_get_object_fn get_configmap, get_secret;
    void *lookup_ud;
};

/* The pod's volumes, materialised. */
struct kl_volume {
    char *name;
    char *host_path; /* a directory, or a file (hostPath of type File*) */
    bool read_only;  /* configMap, secret, downwardAPI, projected: always */
};
struct kl_pod_volumes {
    struct kl_volume *v;
    size_t n;
    char *pod_dir; /* <root>/var/lib/kubelet/pods/<uid> */
};
void kl_pod_volumes_free(struct kl_pod_volumes *vols);
DEFINE_CLEANUP_FUNC(struct kl_pod_volumes, kl_pod_volumes_free)

/* Creates the pod's folder and every volume (again on each call: configMap and secret contents
 * are refreshed). The error message is the kubelet's FailedMount text
 * ("MountVolume.SetUp failed for volume \"x\" : ..."). */
int kl_pod_volumes_setup(const struct kl_spec_input *in, struct kl_pod_volumes **ret,
                         struct err *e);
/* Removes the pod's emptyDir and materialised volumes (not hostPath contents). */
int kl_pod_volumes_teardown(const char *node_root, const char *pod_uid, struct err *e);
/* Removes the tree at `dir` (files, folders; links not followed, mounts not crossed); a missing
 * one is no error. */
int kl_tree_remove(const char *dir, struct err *e);

/* Kubernetes' $(VAR) expansion (third_party/forked/golang/expansion): $(NAME) becomes the value
 * of env entry NAME ("NAME=value" strings, the last definition wins) when defined, else stays
 * as written; $$ becomes $. Caller frees. */
char *kl_expand(const char *in, const char *const *env, size_t n_env);

/* The value of a fieldRef ("metadata.labels['k']", "status.podIP", ...). -EINVAL for a path the
 * kubelet does not support. Caller frees. */
int kl_field_ref(const struct kl_spec_input *in, const char *field_path, char **ret, struct err *e);
/* The value of a resourceFieldRef of container c ("limits.cpu" with its divisor). */
int kl_resource_field_ref(const struct kl_spec_input *in, const json_t *c, const json_t *ref,
                          char **ret, struct err *e);

/* One container, ready for kl-runtime (the shell adds devices, netns, log path). */
struct kl_ctr_build {
    char **argv, **envp; /* NULL-terminated */
    char *workdir;       /* NULL: the image's ("/") */
    struct kl_mount *mounts;
    size_t n_mounts;
    char **owned; /* strings the mounts point into */
    size_t n_owned;
};
void kl_ctr_build_free(struct kl_ctr_build *b);
DEFINE_CLEANUP_FUNC(struct kl_ctr_build, kl_ctr_build_free)

/* The container (init: spec.initContainers[index], else spec.containers[index]) with image
 * im: argv from command/args or the image's entrypoint, env (service variables, envFrom, env,
 * expansion, GPUOP_SIM_IMAGE, sim_env), volumeMounts against vols, the simulated images' bin
 * folder and the gpuop build folder, and the service-account token when the pod has no
 * projected kube-api-access volume and automountServiceAccountToken is not false. The error is
 * the kubelet's CreateContainerConfigError text (a missing ConfigMap key...). */
int kl_ctr_build(const struct kl_spec_input *in, const struct kl_pod_volumes *vols, bool init,
                 size_t index, const struct kl_image *im, struct kl_ctr_build **ret, struct err *e);

/* The nvidia runtime handler as gpuop's runs by default (docs/runtime.md), in kubelet-sim's
 * terms: the simulated images read NVIDIA_VISIBLE_DEVICES as the GPUs the handler gave them
 * (sim/images/README.md), so this is the value a container's process gets, given the value its
 * spec and devices set (the last one; NULL when unset), whether it is privileged, and its mounts.
 * The device plugin's volume-mount list (the kubelet's /dev/null, or the node's through a
 * hostPath volume, mounted at /var/run/nvidia-container-devices/<device>) always counts; the
 * variable's own devices only for a privileged container, else they become "void". NULL: the
 * value stays as it is. Pure; the result is owned. */
char *kl_nvidia_visible(const char *value, bool privileged, const struct kl_mount *mounts,
                        size_t n_mounts, const char *node_root);

#endif

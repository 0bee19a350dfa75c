/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migrate: `gpuop migrate --from nvidia` and `--to nvidia`, the switch between NVIDIA's GPU
 * Operator and gpuop without draining a GPU. The pure core: what the cluster holds in (read by
 * migrate-main.c), the preconditions checked, the writes planned and the notes to print out.
 *
 *   --from nvidia  NVIDIA's operator stopped (its Deployment at 0 replicas or gone), the CRD
 *                  versions gpuop knows, one ClusterPolicy, every GPU node's driver with a known
 *                  owner, no driver upgrade in flight. Then: NVIDIA's operator Deployment
 *                  deleted (its selector is not gpuop's chart's, and selectors cannot change),
 *                  the objects gpuop's chart also renders (the ClusterPolicy, the operator's
 *                  ServiceAccount and Service) given Helm's ownership metadata of gpuop's
 *                  release, so that `helm install` takes them over, and NVIDIA's release record
 *                  rewritten to keep every object and run no delete hook, so that `helm
 *                  uninstall` of NVIDIA's release deletes nothing. What gpuop's operator then
 *                  does with each object is src/lib/adopt's plan, printed too.
 *   --to nvidia    the same preconditions with gpuop's operator stopped. Then: gpuop's operator
 *                  Deployment deleted, the chart's objects given NVIDIA's release's metadata,
 *                  gpuop's release record made to keep everything (its uninstall hook dropped),
 *                  the toolkit's cleanup turned on (each node's runtime configuration goes back
 *                  to what it was, handing the `nvidia` handler back to NVIDIA's toolkit as its
 *                  pods replace gpuop's), a surge device plugin pod on each node (gpuop's plugin
 *                  on a socket of its own, so that the kubelet keeps a plugin for the node's
 *                  GPUs while NVIDIA's replaces gpuop's; removed by hand once NVIDIA's plugin
 *                  runs, as the notes say), and the DaemonSets whose selector NVIDIA's operator
 *                  cannot update deleted with their pods orphaned (NVIDIA's, created with its
 *                  selector, claims them). What gpuop leaves behind is listed.
 *
 * A failed precondition refuses the whole migration: no write is planned. Helm release records
 * (Secrets sh.helm.release.v1.<name>.v<N>: base64 of gzip of the release JSON) are decoded and
 * encoded here, bytes in and out (release.c).
 *
 * Ownership: struct mig_world is borrowed; struct mig_plan owns everything in it.
 */
#ifndef GPUOP_MIGRATE_H
#define GPUOP_MIGRATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "adopt.h"
#include "kube.h"
#include "util.h"

enum mig_direction { MIG_FROM_NVIDIA, MIG_TO_NVIDIA };

/* What the shell read. Any array may be empty; NULL counts as empty. */
struct mig_world {
    enum mig_direction dir;
    const char *ns;             /* the operators' namespace */
    const char *release;        /* gpuop's Helm release name */
    const char *nvidia_release; /* NVIDIA's Helm release name */
    const json_t *deployments;  /* Deployments in ns */
    const json_t *crds;         /* the CRDs of nvidia.com that exist */
    const json_t *policies;     /* ClusterPolicies */
    const json_t *nodes;
    const json_t *pods;     /* pods in ns */
    const json_t *objects;  /* as adopt_input.objects, plus Services and ServiceAccounts */
    const json_t *releases; /* Helm's release Secrets in ns (label owner=helm) */
};

struct mig_check {
    const char *name; /* "NVIDIA's operator stopped" */
    bool ok;
    char *detail;
};

enum mig_write_kind {
    MIG_DELETE,        /* background propagation */
    MIG_DELETE_ORPHAN, /* its dependents (pods) orphaned */
    MIG_PATCH_MERGE,
    MIG_PATCH_STRATEGIC,
    MIG_REPLACE, /* body: the whole object, with its resourceVersion (a PUT) */
    MIG_CREATE,  /* body: the object; one that exists already is left as it is */
};

struct mig_write {
    enum mig_write_kind kind;
    char *res_kind; /* "Deployment", "ClusterPolicy", "Secret", ... */
    char *ns;       /* NULL: cluster-scoped */
    char *name;
    json_t *body; /* the patch or the object; NULL for deletes */
    char *why;
};

struct mig_plan {
    enum mig_direction dir;
    struct mig_check *checks;
    size_t n_checks;
    bool refused; /* a check failed: writes is empty */
    struct mig_write *writes;
    size_t n_writes;
    /* --from nvidia: what gpuop's operator will do once installed (src/lib/adopt) */
    bool has_takeover;
    struct adopt_plan takeover;
    /* --to nvidia: the toolkit DaemonSet whose cleanup rollout the shell waits for, or NULL */
    char *toolkit_ds;
    /* --to nvidia: the surge device plugin pods (one per node, made or there already) the shell
     * waits for, Ready and registered, before it returns */
    size_t surge_pods;
    json_t *notes; /* strings: GPU access, what stays behind, the next steps */
};

/* Fails only on input it cannot read at all (a policy whose maxUnavailable does not parse); a
 * failed precondition is a plan with refused set. */
int mig_plan(const struct mig_world *w, struct mig_plan *ret, struct err *e);
void mig_plan_done(struct mig_plan *p);
/* The plan as text for a person: preconditions, writes (as done with apply, else as they would
 * be), the takeover plan, the notes. *ret: a new string. */
int mig_plan_text(const struct mig_plan *p, bool apply, char **ret, struct err *e);

/* ---- the requests (requests.c) ---------------------------------------------------------------
 * What the shell asks of the API server, decided here: the options as typed, the lists read,
 * the request each planned write is, the refusal. */

/* The options, as the shell's option table fills them. */
struct mig_options {
    const char *from, *to, *ns, *release, *nvidia_release, *kubeconfig, *context;
    bool apply, roll;
    unsigned max_unavailable; /* --roll: nodes at once; 0: the ClusterPolicy's */
    uint64_t timeout_ms;      /* --to nvidia --apply: each wait's bound; --roll: the whole roll's */
};
void mig_options_defaults(struct mig_options *o);
/* One of --from/--to, naming nvidia; the names DNS labels. The error names the flag. */
int mig_options_check(const struct mig_options *o, enum mig_direction *ret_dir, struct err *e);

/* The lists the shell reads, owned: JSON arrays of objects, each with its kind set. */
struct mig_lists {
    json_t *deployments, *crds, *policies, *nodes, *pods, *objects, *releases;
};
void mig_lists_init(struct mig_lists *l); /* every list empty */
void mig_lists_done(struct mig_lists *l);

/* One list to read: the kind (namespaced ones in the operators' namespace), the label selector,
 * the list of mig_lists it goes into (its offset). A kind the server does not serve (404) reads
 * as empty. */
struct mig_read {
    const struct kube_resource *res;
    const char *selector; /* NULL: every object */
    size_t field;         /* offsetof(struct mig_lists, ...) */
};
extern const struct mig_read mig_reads[]; /* in reading order, ended by {0} */
extern const char *const mig_crd_names[]; /* the CRDs read by name (absent: skipped); NULL-ended */
/* A list's items (list: a kube_list answer; its items are given their kind) into rd's list. */
void mig_lists_add(struct mig_lists *l, const struct mig_read *rd, json_t *list);
/* The world mig_plan reads: the options and the lists, borrowed. */
struct mig_world mig_world_of(const struct mig_options *o, enum mig_direction dir,
                              const struct mig_lists *l);

enum mig_verb { MIG_VERB_DELETE, MIG_VERB_PATCH, MIG_VERB_UPDATE, MIG_VERB_CREATE };
/* A planned write as a request to the API server. */
struct mig_request {
    const struct kube_resource *res;
    enum mig_verb verb;
    enum kube_propagation propagation; /* deletes */
    enum kube_patch_type patch;        /* patches */
    int done_code; /* the error that says it is done already (-ENOENT, -EEXIST); 0 none */
};
/* -EINVAL naming the kind when it is not one migrate writes. */
int mig_request_of(const struct mig_write *w, struct mig_request *ret, struct err *e);
/* A refused plan as an error (-EPERM naming the first failed precondition); 0 when not refused. */
int mig_plan_refusal(const struct mig_plan *p, struct err *e);
/* The Ready pods of a list (a kube_list answer): the surge device plugins' wait. */
size_t mig_pods_ready(const json_t *list);

/* A planned write, added to a growing array (body and why taken), and an array's end. */
void mig_write_add(struct mig_write **writes, size_t *n, enum mig_write_kind k,
                   const char *res_kind, const char *ns, const char *name, json_t *body, char *why);
void mig_writes_free(struct mig_write *writes, size_t n);

/* ---- the way back, node by node (roll.c) -----------------------------------------------------
 * `gpuop migrate --to nvidia --roll`: after --apply (the ClusterPolicy's DaemonSets at OnDelete)
 * and NVIDIA's chart, NVIDIA's DaemonSets replace none of gpuop's operand pods on their own. The
 * roll replaces them node by node, at most max_unavailable nodes at once: a node's turn is marked
 * on the node (annotation MIG_ANN_ROLL), then every gpuop operand pod there is deleted (its
 * DaemonSet, NVIDIA's now, makes NVIDIA's pod in its place; the driver's pods are never touched,
 * the surge device plugin made by --apply keeps the node's GPUs registered); once NVIDIA's
 * device plugin there has been Ready ADOPT_SURGE_SETTLE_MS the surge plugin goes, and once every
 * NVIDIA operand pod there is Ready and no pod of gpuop's is left the mark goes: the node is
 * done. Everything is read back from the pods and the marks, so a roll stopped at any point and
 * run again goes on where it was. One call plans one step; the shell repeats it until done. */
#define MIG_ANN_ROLL            "migrate.gpuop.dev/roll"
#define MIG_ANN_UPDATE_STRATEGY "migrate.gpuop.dev/update-strategy"

struct mig_roll_input {
    const char *ns;
    const json_t *pods;        /* the namespace's pods */
    const json_t *daemonsets;  /* the namespace's DaemonSets */
    const json_t *nodes;       /* the nodes (their MIG_ANN_ROLL marks) */
    long long max_unavailable; /* >= 1 */
    uint64_t now_ms;           /* ms since the epoch; 0: any Ready pod is settled */
    const json_t *policy;      /* the ClusterPolicy (its MIG_ANN_UPDATE_STRATEGY), or NULL */
    const char *nvidia_release;
};

struct mig_roll {
    struct mig_write *writes; /* in order: node marks, pod deletes, surge deletes, unmarks */
    size_t n_writes;
    size_t nodes_todo, nodes_in_flight, nodes_done;
    char *waiting; /* what the next step waits for (one line), or NULL */
    bool done;     /* every node done: nothing of gpuop's operands left */
    char *restore; /* done: how to give NVIDIA's DaemonSets back the update strategy the policy
                      had before --apply (one line), or NULL */
};

/* -EPERM when the roll cannot go on, naming why: a DaemonSet of NVIDIA's that owns gpuop's pods
 * rolls on its own (not OnDelete), or a node's device plugin would go with no surge plugin
 * beside it. Nothing is planned then. */
int mig_roll_plan(const struct mig_roll_input *in, struct mig_roll *ret, struct err *e);
void mig_roll_done(struct mig_roll *r);

/* ---- Helm release records (release.c) ---------------------------------------------------------
 */

/* A release Secret's .data.release as the API returns it (base64 of Helm's base64 of gzip'd
 * JSON; Helm's uncompressed form is read too) into the release object. Bounded: at most 64 MiB
 * uncompressed. Errors name what did not decode. */
int mig_release_decode(const char *data, json_t **ret, struct err *e);
/* The release object into .data.release (gzip'd as Helm writes it). New string. */
int mig_release_encode(const json_t *release, char **ret, struct err *e);
/*
 * Makes uninstalling the release delete nothing: every document of its manifest gets the
 * annotation helm.sh/resource-policy: keep, and its pre-delete and post-delete hooks are dropped
 * (NVIDIA's CRD cleanup and NFD's label pruning among them). *ret_docs, *ret_hooks: how many
 * documents were marked and hooks dropped. A manifest document that does not parse fails naming
 * its place; nothing is changed then.
 */
int mig_release_keep_all(json_t *release, size_t *ret_docs, size_t *ret_hooks, struct err *e);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop operator apply-crds`, the chart's pre-upgrade hook (op-hooks.h): a shell over hooks.c's
 * decisions. */
#include <dirent.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kobj.h"
#include "kube.h"
#include "op-cli.h"
#include "op-hooks.h"
#include "svc.h"
#include "yamlcfg.h"

#define COMPONENT "operator"

struct op_crds_cli {
    const char *dir, *kubeconfig, *context;
};

#define C(m) offsetof(struct op_crds_cli, m)
static const struct svc_option crds_options[] = {
    {.flag = "dir",
     .kind = SVC_STRING,
     .off = C(dir),
     .metavar = "DIR",
     .help = "the folder of CRD files (*.yaml, one or more CRDs each; required)"},
    {.kind = SVC_FRAGMENT, .fragment = svc_kubeconfig_option, .off = C(kubeconfig)},
    {.kind = SVC_FRAGMENT, .fragment = svc_context_option, .off = C(context)},
    {0},
};
#undef C

static int crds_configure(struct svc *s, struct err *e)
{
    struct op_crds_cli *c = svc_state(s);
    return !c->dir || !*c->dir ? err_set(e, -EINVAL, "--dir DIR is required") : 0;
}

static int yaml_file(const struct dirent *d)
{
    return op_crd_file(d->d_name);
}

/* Every CRD of every *.yaml file in dir (name order), checked: a new array. Nothing is written
 * when one file or document is wrong. */
static int read_crds(const char *dir, json_t **ret, struct err *e)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, yaml_file, alphasort);
    if (n < 0)
        return err_errno(e, -errno, "read \"%s\"", dir);
    _cleanup_json_ json_t *out = json_array();
    int r = 0;
    if (n > OP_CRD_FILES_MAX)
        r = err_set(e, -E2BIG, "\"%s\": %d CRD files, at most %d", dir, n, OP_CRD_FILES_MAX);
    for (int i = 0; i < n && r == 0; i++) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, names[i]->d_name);
        _cleanup_json_ json_t *docs = NULL;
        if ((r = yaml_load_file_all(path, &docs, e)) == 0)
            r = op_crds_add(out, docs, path, e);
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (r < 0)
        return r;
    if (json_array_size(out) == 0)
        return err_set(e, -ENOENT, "\"%s\": no CRD in any *.yaml file", dir);
    *ret = steal_ptr(&out);
    return 0;
}

static int apply_crd(struct kube_client *kc, json_t *crd, struct err *e)
{
    const char *name = kobj_name(crd);
    for (int attempt = 0;; attempt++) {
        _cleanup_json_ json_t *live = NULL, *obj = NULL, *out = NULL;
        int r = kube_get(kc, &KUBE_CRDS, NULL, name, &live, e);
        if (r < 0 && r != -ENOENT)
            return err_prefix(e, "CRD %s", name);
        err_clear(e);
        switch (op_crd_plan(crd, live, &obj)) {
        case OP_CRD_UNCHANGED:
            log_info(COMPONENT, "CRD unchanged", "name=%s", name);
            return 0;
        case OP_CRD_CREATE:
            r = kube_create(kc, &KUBE_CRDS, NULL, crd, &out, e);
            break;
        case OP_CRD_UPDATE:
            r = kube_update(kc, &KUBE_CRDS, NULL, obj, &out, e);
            break;
        }
        if ((r == KUBE_ECONFLICT || r == -EEXIST) && attempt < 5) {
            err_clear(e);
            continue; /* someone wrote it meanwhile: read it again */
        }
        if (r < 0)
            return err_prefix(e, "CRD %s", name);
        log_info(COMPONENT, live ? "CRD updated" : "CRD created", "name=%s", name);
        return 0;
    }
}

static int crds_run(struct svc *s, struct err *e)
{
    struct op_crds_cli *c = svc_state(s);
    _cleanup_json_ json_t *crds = NULL;
    int r = read_crds(c->dir, &crds, e);
    if (r < 0)
        return svc_bad_input(s, r);
    _cleanup_(kube_client_freep) struct kube_client *kc = NULL;
    if ((r = kube_client_open(KUBE_CALLER_COMMAND, c->kubeconfig, c->context, svc_stop(s), &kc,
                              e)) < 0)
        return r;
    size_t i;
    json_t *crd;
    json_array_foreach (crds, i, crd) {
        if ((r = apply_crd(kc, crd, e)) < 0)
            return r;
    }
    return 0;
}

const struct svc_component op_apply_crds_component = {
    .name = "apply-crds",
    .summary = "Create or update the CRDs in a folder (the chart's pre-upgrade hook)",
    .usage = "Usage: gpuop operator apply-crds --dir DIR\n\n"
             "Creates each CustomResourceDefinition of DIR/*.yaml that is absent and replaces\n"
             "each one whose spec, labels or annotations differ (labels and annotations others\n"
             "set are kept). helm never updates a chart's crds/ after the first install; the\n"
             "chart runs this as a pre-upgrade hook (operator.upgradeCRD).\n",
    .epilogue = "Exit: 0 done; 2 bad input (a file that is not a CRD: nothing is written); 1 the\n"
                "API server refused a write.\n",
    .options = {crds_options},
    .state_size = sizeof(struct op_crds_cli),
    .configure = crds_configure,
    .run = crds_run,
};

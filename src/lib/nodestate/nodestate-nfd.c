/* SPDX-License-Identifier: Apache-2.0 */
/* Node Feature Discovery's labels (nodestate.h): what nfd-worker's pci, kernel and system
 * sources give a node, the set a labeller owns (remembered in an annotation, so a label it no
 * longer produces is removed and nothing else is), and the NVIDIA functions under sysfs. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kobj.h"
#include "nodestate.h"

#define NFD_LABELS_LIST_MAX (64u << 10)

static void set_label(json_t *labels, const char *name, const char *value)
{
    if (value && kobj_valid_label_value(value))
        json_object_set_new(labels, name, json_string(value));
}

/* nfd's version split: "5.15.0-127-generic" gives 5, 15, 0 (fields split at sep). */
static void version_labels(json_t *labels, const char *prefix, const char *version,
                           const char *const *names, size_t n_names, const char *sep)
{
    _cleanup_free_ char *copy = xstrdup(version);
    char *save = NULL, *tok = strtok_r(copy, sep, &save);
    for (size_t i = 0; tok && i < n_names; i++, tok = strtok_r(NULL, sep, &save)) {
        _cleanup_free_ char *name = xasprintf("%s%s.%s", NODESTATE_NFD_PREFIX, prefix, names[i]);
        set_label(labels, name, tok);
    }
}

json_t *nodestate_nfd_labels(const struct nodestate_nfd_input *in)
{
    json_t *labels = json_object();
    if (in->n_pci > 0)
        json_object_set_new(labels, NODESTATE_NFD_PREFIX "pci-10de.present", json_string("true"));
    for (size_t i = 0; i < in->n_pci; i++) {
        _cleanup_free_ char *name =
            xasprintf(NODESTATE_NFD_PREFIX "pci-%s_10de.present", in->pci_classes[i]);
        if (kobj_valid_label_value(in->pci_classes[i]))
            json_object_set_new(labels, name, json_string("true"));
    }
    if (in->kernel) {
        set_label(labels, NODESTATE_NFD_PREFIX "kernel-version.full", in->kernel);
        static const char *const kv[] = {"major", "minor", "revision"};
        version_labels(labels, "kernel-version", in->kernel, kv, ARRAY_SIZE(kv), ".-");
    }
    set_label(labels, NODESTATE_NFD_PREFIX "system-os_release.ID", in->os_id);
    if (in->os_version_id) {
        set_label(labels, NODESTATE_NFD_PREFIX "system-os_release.VERSION_ID", in->os_version_id);
        static const char *const ov[] = {"major", "minor"};
        version_labels(labels, "system-os_release.VERSION_ID", in->os_version_id, ov,
                       ARRAY_SIZE(ov), ".");
    }
    return labels;
}

/* The annotation's names, as full label names (a name without a '/' has NFD's prefix). */
static json_t *owned_names(const json_t *annotations, const char *ann)
{
    json_t *prev = json_array();
    const char *list = kobj_str(annotations, ann);
    if (!list)
        return prev;
    _cleanup_free_ char *copy = xstrdup(list);
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (strchr(t, '/'))
            json_array_append_new(prev, json_string(t));
        else
            json_array_append_new(prev, json_sprintf("%s%s", NODESTATE_NFD_PREFIX, t));
    }
    return prev;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "kernel-version.full,nvidia.com/gpu.product,pci-10de.present": NULL when it would not fit. */
static char *owned_list(const json_t *labels)
{
    size_t n = json_object_size(labels), i = 0;
    _cleanup_free_ const char **names = xcalloc(n + 1, sizeof(*names));
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)labels, k, v)
        names[i++] = str_has_prefix(k, NODESTATE_NFD_PREFIX) ? k + strlen(NODESTATE_NFD_PREFIX) : k;
    qsort(names, n, sizeof(*names), cmp_str);
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, NFD_LABELS_LIST_MAX);
    for (i = 0; i < n; i++)
        sbuf_addf(&b, "%s%s", i ? "," : "", names[i]);
    if (sbuf_check(&b) < 0)
        return NULL;
    return sbuf_steal(&b);
}

void nodestate_nfd_apply(json_t *labels, json_t *annotations, const json_t *nfd_labels,
                         const char *ann)
{
    json_t *prev = owned_names(annotations, ann);
    size_t i;
    json_t *p;
    json_array_foreach (prev, i, p) {
        const char *name = json_string_value(p);
        if (!json_object_get(nfd_labels, name))
            json_object_del(labels, name);
    }
    json_decref(prev);
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)nfd_labels, k, v)
        if (!streq_ptr(kobj_str(labels, k), json_string_value(v)))
            json_object_set_new(labels, k, json_string(json_string_value(v)));
    _cleanup_free_ char *list = owned_list(nfd_labels);
    if (list && list[0]) {
        if (!streq_ptr(kobj_str(annotations, ann), list))
            json_object_set_new(annotations, ann, json_string(list));
    } else {
        json_object_del(annotations, ann);
    }
}

bool nodestate_nfd_present(const json_t *node)
{
    const json_t *a = kobj_annotations(node);
    return kobj_str(a, NODESTATE_NFD_WORKER_ANN) != NULL ||
           kobj_str(a, NODESTATE_NFD_LABELS_ANN) != NULL;
}

void nodestate_strv_free(char **v)
{
    for (char **p = v; p && *p; p++)
        free(*p);
    free(v);
}

#define NODESTATE_PCI_MAX 4096 /* PCI functions a node lists; more is refused */

int nodestate_pci_nvidia_gpu_classes(const char *sysfs, char ***ret, size_t *ret_n, struct err *e)
{
    _cleanup_free_ char *dir = xasprintf("%s/bus/pci/devices", sysfs);
    _cleanup_(closedirp) DIR *d = opendir(dir);
    if (!d)
        return err_errno(e, -errno, "list PCI devices \"%s\"", dir);
    size_t n = 0, seen = 0;
    char **v = xcalloc(1, sizeof(char *));
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        if (++seen > NODESTATE_PCI_MAX) {
            nodestate_strv_free(v);
            return err_set(e, -E2BIG, "%s: more than %d PCI functions", dir, NODESTATE_PCI_MAX);
        }
        _cleanup_free_ char *vp = xasprintf("%s/%s/vendor", dir, de->d_name);
        _cleanup_free_ char *cp = xasprintf("%s/%s/class", dir, de->d_name);
        _cleanup_free_ char *vendor = NULL, *class = NULL;
        struct err ignore = {0};
        /* A function that vanished or cannot be read is not a GPU of this pass. */
        if (file_read_all(vp, 64, &vendor, NULL, &ignore) < 0 ||
            file_read_all(cp, 64, &class, NULL, &ignore) < 0)
            continue;
        /* vendor "0x10de", class "0x030200": display controllers (0x03xxxx) only. */
        if (strncasecmp(vendor, "0x10de", 6) != 0 || strncmp(class, "0x03", 4) != 0 ||
            strlen(class) < 8)
            continue;
        v = xrealloc(v, (n + 2) * sizeof(char *));
        v[n++] = xasprintf("%.4s", class + 2);
        v[n] = NULL;
    }
    qsort(v, n, sizeof(char *), cmp_str);
    *ret = v;
    *ret_n = n;
    return 0;
}

int nodestate_os_release(const char *text, size_t len, char *id, size_t id_n, char *version_id,
                         size_t version_n)
{
    if (nodestate_env_get(text, len, "ID", id, id_n) < 0)
        id[0] = '\0';
    if (nodestate_env_get(text, len, "VERSION_ID", version_id, version_n) < 0)
        version_id[0] = '\0';
    return id[0] ? 0 : -ENOENT;
}

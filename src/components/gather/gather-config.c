/* SPDX-License-Identifier: Apache-2.0 */
/* gather's options as typed, the bundle's file name and folder, its facts, and the names of what
 * goes into it (gather.h, "the run"). Pure: times come in. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gather.h"
#include "kobj.h"
#include "statusview.h"

void gather_options_defaults(struct gather_options *o)
{
    o->ns = "gpu-operator";
    o->tail = 1000;
    o->max_size_s = "64Mi";
    o->log_bytes_s = "1Mi";
    o->doctor_timeout_ms = 120000;
}

/* A byte size as a Kubernetes quantity ("64Mi", "1G", "1048576"), within [min, max]. */
static int parse_size(const char *flag, const char *s, uint64_t min, uint64_t max, uint64_t *ret,
                      struct err *e)
{
    int64_t milli = 0;
    if (!s || kobj_quantity_milli(s, &milli) < 0 || milli < 0)
        return err_set(e, -EINVAL, "--%s %s: expected a size such as 64Mi", flag, s ? s : "");
    uint64_t v = (uint64_t)milli / 1000;
    if (v < min || v > max)
        return err_set(e, -ERANGE, "--%s %s: expected %llu to %llu bytes", flag, s,
                       (unsigned long long)min, (unsigned long long)max);
    *ret = v;
    return 0;
}

int gather_options_check(struct gather_options *o, struct err *e)
{
    uint64_t max_size, log_bytes;
    int r;
    if ((r = parse_size("max-size", o->max_size_s, GATHER_MIN_SIZE, GATHER_MAX_SIZE, &max_size,
                        e)) < 0 ||
        (r = parse_size("log-bytes", o->log_bytes_s, 1024, GATHER_LOG_BYTES_MAX, &log_bytes, e)) <
            0)
        return r;
    if (!o->ns || !o->ns[0] || strlen(o->ns) > 63)
        return err_set(e, -EINVAL, "--namespace \"%s\": expected a namespace name",
                       o->ns ? o->ns : "");
    if (o->output && !o->output[0])
        return err_set(e, -EINVAL, "--output: expected a file name");
    o->max_size = max_size;
    o->log_bytes = log_bytes;
    return 0;
}

void gather_output_path(const char *output, bool output_is_dir, uint64_t now_ms, char *path,
                        size_t pn, char *root, size_t rn)
{
    assert(pn > 0 && rn >= 2);
    char stamp[40], iso[40];
    time_rfc3339(now_ms, iso, sizeof(iso));
    size_t k = 0;
    for (const char *p = iso; *p && k + 1 < sizeof(stamp); p++)
        if (*p != '-' && *p != ':')
            stamp[k++] = *p;
    stamp[k] = '\0';
    char def[96];
    snprintf(def, sizeof(def), "gpuop-gather-%s.tar.gz", stamp);
    if (!output)
        snprintf(path, pn, "%s", def);
    else if (output_is_dir)
        snprintf(path, pn, "%s%s%s", output, str_has_suffix(output, "/") ? "" : "/", def);
    else
        snprintf(path, pn, "%s", output);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char name[96];
    strlcpy_s(name, base, sizeof(name));
    static const char *const exts[] = {".tar.gz", ".tgz", ".gz"};
    for (size_t i = 0; i < ARRAY_SIZE(exts); i++)
        if (str_has_suffix(name, exts[i])) {
            name[strlen(name) - strlen(exts[i])] = '\0';
            break;
        }
    gather_path_part(name, root, rn);
}

void gather_output_dir(const char *path, char *buf, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, n, ".");
    else if (slash == path)
        snprintf(buf, n, "/");
    else
        snprintf(buf, n, "%.*s", (int)(slash - path), path);
}

json_t *gather_facts(const struct gather_options *o, const char *server, uint64_t now_ms)
{
    char created[40];
    time_rfc3339(now_ms, created, sizeof(created));
    struct sbuf cmd _cleanup_sbuf_;
    sbuf_init(&cmd, 4096);
    sbuf_addf(&cmd, "gpuop gather --namespace %s --tail %u --log-bytes %s --max-size %s", o->ns,
              o->tail, o->log_bytes_s, o->max_size_s);
    if (o->since_ms)
        sbuf_addf(&cmd, " --since %llus", (unsigned long long)(o->since_ms / 1000));
    if (o->doctor)
        sbuf_adds(&cmd, " --doctor");
    if (o->context)
        sbuf_addf(&cmd, " --context %s", o->context);
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:I}", "version",
                     "gpuop " GPUOP_VERSION " (git " GPUOP_GIT_REV ")", "created", created,
                     "command", sbuf_check(&cmd) == 0 ? cmd.data : "gpuop gather", "kubeconfig",
                     o->kubeconfig ? o->kubeconfig
                                   : "(default: $KUBECONFIG, in-cluster, ~/.kube/config)",
                     "context", o->context ? o->context : "(current)", "server", server,
                     "namespace", o->ns, "maxSize", (json_int_t)o->max_size);
}

void gather_source_names(const struct gather_source *src, const char *ns, char *what, size_t wn,
                         char *dir, size_t dn)
{
    if (src->res->namespaced) {
        snprintf(what, wn, "%s in namespace %s", src->res->plural, ns);
        snprintf(dir, dn, "namespaces/%s/%s", ns, src->dir);
    } else {
        snprintf(what, wn, "%s", src->res->plural);
        snprintf(dir, dn, "cluster/%s", src->dir);
    }
}

void gather_object_names(const char *dir, const char *kind, const json_t *obj, char *path,
                         size_t pn, char *desc, size_t dn)
{
    char name[254];
    gather_path_part(kobj_name(obj), name, sizeof(name));
    snprintf(path, pn, "%s/%s.yaml", dir, name);
    snprintf(desc, dn, "%s %s", kind, kobj_name(obj) ?: "");
}

enum gather_keep gather_keep_of(const struct gather_source *src)
{
    return src->res == &KUBE_PODS                   ? GATHER_KEEP_PODS
           : src->res == &KUBE_DEPLOYMENTS          ? GATHER_KEEP_DEPLOYMENTS
           : streq_ptr(src->dir, "clusterpolicies") ? GATHER_KEEP_POLICIES
           : streq_ptr(src->dir, "nvidiadrivers")   ? GATHER_KEEP_DRIVERS
                                                    : GATHER_KEEP_NONE;
}

int gather_status_json(const struct gather_status_in *in, char **ret, size_t *ret_redactions,
                       struct err *e)
{
    /* a list that could not be read counts as empty, as gpuop status counts a list it may not
     * read */
    _cleanup_(json_decrefp) json_t *none = json_array();
    struct st_objects so = {.policies = in->policies ? in->policies : none,
                            .drivers = in->drivers ? in->drivers : none,
                            .nodes = in->nodes ? in->nodes : none,
                            .events = in->events ? in->events : none,
                            .pods = in->pods ? in->pods : none,
                            .quotas = in->quotas ? in->quotas : none,
                            .now_ms = in->now_ms};
    _cleanup_(json_decrefp) json_t *model = st_model(&so, st_sections);
    size_t red = model ? gather_redact_object(model) : 0;
    _cleanup_free_ char *text = model ? json_dumps(model, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    if (!text)
        return err_set(e, -ENOMEM, "render status.json");
    *ret = xasprintf("%s\n", text);
    *ret_redactions = red;
    return 0;
}

void gather_doctor_path(const char *node, bool report, char *buf, size_t n)
{
    char part[254];
    gather_path_part(node, part, sizeof(part));
    snprintf(buf, n, "doctor/%s.%s", part, report ? "json" : "log");
}

bool gather_doctor_report(int exit_code)
{
    return exit_code == 0 || exit_code == 3 || exit_code == 4;
}

size_t gather_log_tail_start(const char *log, size_t len, size_t max)
{
    if (len <= max)
        return 0;
    size_t at = len - max;
    const char *nl = memchr(log + at, '\n', len - at);
    return nl && (size_t)(nl - log) + 1 < len ? (size_t)(nl - log) + 1 : at;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rtconfig's shell: detection, the file I/O around the pure editing cores (rtconfig-containerd.c,
 * rtconfig-crio.c, rtconfig-docker.c), backups, restore, the reload request and the check.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "rtconfig-internal.h"
#include "tomlx.h"

/* ---- names ------------------------------------------------------------------------------- */

const char *rtconfig_kind_name(enum rtconfig_kind k)
{
    switch (k) {
    case RTCONFIG_CONTAINERD:
        return "containerd";
    case RTCONFIG_CRIO:
        return "cri-o";
    case RTCONFIG_DOCKER:
        return "docker";
    }
    return "unknown";
}

int rtconfig_kind_parse(const char *s, enum rtconfig_kind *ret)
{
    if (!s)
        return -EINVAL;
    /* A containerRuntimeVersion: "containerd://1.7.24", "cri-o://1.30.4", "docker://24.0.7". */
    const char *sep = strstr(s, "://");
    size_t n = sep ? (size_t)(sep - s) : strlen(s);
    static const struct {
        const char *name;
        enum rtconfig_kind k;
    } names[] = {{"containerd", RTCONFIG_CONTAINERD},
                 {"cri-o", RTCONFIG_CRIO},
                 {"crio", RTCONFIG_CRIO},
                 {"docker", RTCONFIG_DOCKER}};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (strlen(names[i].name) == n && strncmp(s, names[i].name, n) == 0) {
            *ret = names[i].k;
            return 0;
        }
    return -EINVAL;
}

const char *rtconfig_restart_mode_name(enum rtconfig_restart_mode m)
{
    switch (m) {
    case RTCONFIG_RESTART_NONE:
        return "none";
    case RTCONFIG_RESTART_SIGNAL:
        return "signal";
    case RTCONFIG_RESTART_SYSTEMD:
        return "systemd";
    }
    return "unknown";
}

int rtconfig_restart_mode_parse(const char *s, enum rtconfig_restart_mode *ret)
{
    for (int m = RTCONFIG_RESTART_NONE; m <= RTCONFIG_RESTART_SYSTEMD; m++)
        if (s && strcmp(s, rtconfig_restart_mode_name((enum rtconfig_restart_mode)m)) == 0) {
            *ret = (enum rtconfig_restart_mode)m;
            return 0;
        }
    return -EINVAL;
}

const char *rtconfig_config_path(enum rtconfig_kind k, const struct rtconfig_options *o)
{
    if (o && o->config_path)
        return o->config_path;
    switch (k) {
    case RTCONFIG_CONTAINERD:
        return RTCONFIG_CONTAINERD_CONFIG;
    case RTCONFIG_CRIO:
        return RTCONFIG_CRIO_CONFIG;
    case RTCONFIG_DOCKER:
        return RTCONFIG_DOCKER_CONFIG;
    }
    return RTCONFIG_CONTAINERD_CONFIG;
}

const char *rtconfig_dropin_path(enum rtconfig_kind k, const struct rtconfig_options *o)
{
    if (k == RTCONFIG_DOCKER)
        return NULL;
    if (o && o->dropin_path)
        return o->dropin_path;
    return k == RTCONFIG_CONTAINERD ? RTCONFIG_CONTAINERD_DROPIN : RTCONFIG_CRIO_DROPIN;
}

const char *rtconfig_undo_name(enum rtconfig_undo u)
{
    switch (u) {
    case RTCONFIG_UNDO_NONE:
        return "none";
    case RTCONFIG_UNDO_ORIGINAL:
        return "original";
    case RTCONFIG_UNDO_EDIT:
        return "edit";
    case RTCONFIG_UNDO_REMOVE:
        return "remove";
    case RTCONFIG_UNDO_LEFT:
        return "left";
    }
    return "unknown";
}

static bool text_eq(struct rtconfig_text a, struct rtconfig_text b)
{
    return a.data && b.data && a.len == b.len && memcmp(a.data, b.data, a.len) == 0;
}

void rtconfig_owned_unedit(struct rtconfig_text base, struct rtconfig_text cur,
                           struct rtconfig_text written, struct rtconfig_text fresh,
                           struct rtconfig_undo_file *ret)
{
    ret->why[0] = '\0';
    if (!cur.data) {
        ret->what = RTCONFIG_UNDO_NONE;
        strlcpy_s(ret->why, "not there", sizeof(ret->why));
    } else if (!text_eq(cur, written) && !text_eq(cur, fresh)) {
        ret->what = RTCONFIG_UNDO_LEFT;
        strlcpy_s(ret->why, "changed since gpuop wrote it", sizeof(ret->why));
    } else {
        ret->what = base.data ? RTCONFIG_UNDO_ORIGINAL : RTCONFIG_UNDO_REMOVE;
    }
}

/* ---- paths and files --------------------------------------------------------------------- */

/* A host path as this process reaches it: under root, every link on the way resolved inside root
 * as the host resolves it (file_root_resolve: an absolute target starts again at root, never
 * at this container's /; ".." stops at root). A link is never replaced: what it points at is
 * read and written. */
struct hpath {
    char *real;  /* what is read and written */
    char *shown; /* for messages: root plus the path, and where a link led */
};

static void hpath_done(struct hpath *h)
{
    free(h->real);
    free(h->shown);
    *h = (struct hpath){0};
}

static const char *root_or_slash(const char *root)
{
    return root && *root ? root : "/";
}

static int hpath_get(const char *root, const char *path, struct hpath *ret, struct err *e)
{
    char buf[PATH_MAX];
    int r = file_root_resolve(root_or_slash(root), path, buf, sizeof(buf));
    if (r < 0)
        return err_errno(e, r, "resolve \"%s\" under \"%s\"", path, root_or_slash(root));
    bool slash = strcmp(root_or_slash(root), "/") == 0;
    size_t n = strlen(root_or_slash(root));
    while (!slash && n > 1 && root[n - 1] == '/')
        n--;
    _cleanup_free_ char *plain =
        slash ? xstrdup(path)
              : xasprintf("%.*s%s%s", (int)n, root, path[0] == '/' ? "" : "/", path);
    ret->real = xstrdup(buf);
    ret->shown = strcmp(plain, buf) == 0 ? xstrdup(plain) : xasprintf("%s (-> %s)", plain, buf);
    return 0;
}

/* Reads path; a missing file is *ret = NULL and 0. */
static int read_opt(const char *path, char **ret, size_t *ret_len, struct err *e)
{
    *ret = NULL;
    *ret_len = 0;
    int r = file_read_all(path, RTCONFIG_CONFIG_MAX, ret, ret_len, e);
    if (r == -ENOENT) {
        err_clear(e);
        return 0;
    }
    return r;
}

/* The state dir (backups, reload.log, status), as this process reaches it. */
static int state_dir(const char *root, const struct rtconfig_options *o, char **ret, struct err *e)
{
    struct hpath h;
    int r = hpath_get(root, o->state_dir ? o->state_dir : RTCONFIG_STATE_DIR, &h, e);
    if (r < 0)
        return r;
    *ret = steal_ptr(&h.real);
    hpath_done(&h);
    return 0;
}

/* What the state dir keeps of a host file: its original (.orig) or its absence (.absent), from
 * the first time gpuop wrote it, and for a file gpuop owns what it last wrote (.written). */
static const char *const backup_kinds[] = {"orig", "absent", "written"};
enum { BACKUP_ORIG, BACKUP_ABSENT, BACKUP_WRITTEN };

static char *backup_name(const char *dir, const char *path, int kind)
{
    _cleanup_free_ char *flat = xstrdup(path[0] == '/' ? path + 1 : path);
    for (char *p = flat; *p; p++)
        if (*p == '/')
            *p = '_';
    return xasprintf("%s/%s.%s", dir, flat, backup_kinds[kind]);
}

/* The backups of path: *ret_have false when there are none (gpuop never wrote it); else the
 * original (data NULL: there was none) and what gpuop last wrote (data NULL: not recorded). */
struct backup {
    bool have;
    char *orig, *written;
    struct rtconfig_text base, last;
};

static void backup_done(struct backup *b)
{
    free(b->orig);
    free(b->written);
    *b = (struct backup){0};
}

static int backup_read(const char *dir, const char *path, struct backup *ret, struct err *e)
{
    _cleanup_free_ char *orig = backup_name(dir, path, BACKUP_ORIG);
    _cleanup_free_ char *absent = backup_name(dir, path, BACKUP_ABSENT);
    _cleanup_free_ char *written = backup_name(dir, path, BACKUP_WRITTEN);
    *ret = (struct backup){0};
    size_t len = 0, wlen = 0;
    int r = read_opt(orig, &ret->orig, &len, e);
    if (r == 0)
        r = read_opt(written, &ret->written, &wlen, e);
    if (r < 0) {
        backup_done(ret);
        return err_prefix(e, "the backup of \"%s\"", path);
    }
    ret->have = ret->orig || access(absent, F_OK) == 0;
    ret->base = (struct rtconfig_text){ret->orig, len};
    ret->last = (struct rtconfig_text){ret->written, wlen};
    return 0;
}

static int backup_drop(const char *dir, const char *path, struct err *e)
{
    for (int k = 0; k < (int)ARRAY_SIZE(backup_kinds); k++) {
        _cleanup_free_ char *p = backup_name(dir, path, k);
        if (unlink(p) < 0 && errno != ENOENT)
            return err_errno(e, -errno, "remove \"%s\"", p);
    }
    return 0;
}

static int mkdir_of(const char *file, unsigned mode, struct err *e)
{
    _cleanup_free_ char *dir = xstrdup(file);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    int r = mkdir_p(dir, mode);
    return r < 0 ? err_errno(e, r, "create \"%s\"", dir) : 0;
}

/* Replaces the file at real atomically (a temp file in its folder, then rename) with its owner
 * and mode kept; a new file is 0644, this process's. */
static int replace(const char *real, const char *shown, const char *data, size_t len, struct err *e)
{
    struct stat st;
    unsigned mode = 0644;
    uid_t uid = (uid_t)-1;
    gid_t gid = (gid_t)-1;
    if (stat(real, &st) == 0) {
        mode = st.st_mode & 07777;
        uid = st.st_uid;
        gid = st.st_gid;
    } else if (errno != ENOENT) {
        return err_errno(e, -errno, "stat %s", shown);
    }
    int r = mkdir_of(real, 0755, e);
    if (r == 0)
        r = file_write_atomic_owned(real, data, len, mode, uid, gid, e);
    return r;
}

/* Writes data to the host path (resolved under root) unless it holds it already. The first time
 * a file is written its original is kept in the state dir (or its absence recorded); for a file
 * gpuop owns (owned: a drop-in) what was written is kept too, so uninstall can tell whether it
 * still holds only that. */
static int put_file(const char *root, const struct rtconfig_options *o, const char *path,
                    const char *data, size_t len, bool owned, bool *changed, struct err *e)
{
    _cleanup_(hpath_done) struct hpath h = {0};
    _cleanup_free_ char *dir = NULL;
    _cleanup_free_ char *cur = NULL;
    size_t cur_len;
    int r = hpath_get(root, path, &h, e);
    if (r == 0)
        r = state_dir(root, o, &dir, e);
    if (r == 0)
        r = read_opt(h.real, &cur, &cur_len, e);
    if (r < 0 || (cur && cur_len == len && memcmp(cur, data, len) == 0))
        return r;

    _cleanup_free_ char *orig = backup_name(dir, path, BACKUP_ORIG);
    _cleanup_free_ char *absent = backup_name(dir, path, BACKUP_ABSENT);
    if (access(orig, F_OK) != 0 && access(absent, F_OK) != 0) {
        r = mkdir_p(dir, 0700);
        if (r < 0)
            return err_errno(e, r, "create \"%s\"", dir);
        r = cur ? file_write_atomic(orig, cur, cur_len, 0600, e)
                : file_write_atomic(absent, "", 0, 0600, e);
        if (r < 0)
            return err_prefix(e, "back up %s", h.shown);
    }
    r = replace(h.real, h.shown, data, len, e);
    if (r == 0 && owned) {
        _cleanup_free_ char *written = backup_name(dir, path, BACKUP_WRITTEN);
        r = file_write_atomic(written, data, len, 0600, e);
    }
    if (r == 0)
        *changed = true;
    return r;
}

/* ---- detection ---------------------------------------------------------------------------- */

static bool exists_under(const char *root, const char *path)
{
    struct hpath h;
    struct err e = {0};
    if (hpath_get(root, path, &h, &e) < 0)
        return false;
    bool there = access(h.real, F_OK) == 0;
    hpath_done(&h);
    return there;
}

static const char *const sockets[][3] = {
    [RTCONFIG_CONTAINERD] = {"/run/containerd/containerd.sock",
                             "/var/run/containerd/containerd.sock"},
    [RTCONFIG_CRIO] = {"/run/crio/crio.sock", "/var/run/crio/crio.sock"},
    [RTCONFIG_DOCKER] = {"/run/docker.sock", "/var/run/docker.sock"},
};
static const char *const configs[][3] = {
    [RTCONFIG_CONTAINERD] = {RTCONFIG_CONTAINERD_CONFIG},
    [RTCONFIG_CRIO] = {RTCONFIG_CRIO_CONFIG, "/etc/crio/crio.conf.d"},
    [RTCONFIG_DOCKER] = {RTCONFIG_DOCKER_CONFIG},
};

int rtconfig_detect(const char *host_root, const char *node_runtime_version, const char *want,
                    enum rtconfig_kind *ret, struct err *e)
{
    enum rtconfig_kind w = RTCONFIG_CONTAINERD, k = RTCONFIG_CONTAINERD;
    if (want && rtconfig_kind_parse(want, &w) < 0)
        return err_set(e, -EINVAL,
                       "unknown container runtime \"%s\" (the policy's default "
                       "runtime): want containerd, cri-o or docker",
                       want);
    if (node_runtime_version && *node_runtime_version) {
        if (rtconfig_kind_parse(node_runtime_version, &k) < 0)
            return err_set(e, -EINVAL,
                           "unknown container runtime \"%s\" (the node's "
                           "containerRuntimeVersion): want containerd, cri-o or docker",
                           node_runtime_version);
    } else {
        /* Sockets first (what runs), then config files (what is installed). */
        bool found[3] = {0};
        int nfound = 0;
        for (int pass = 0; pass < 2 && nfound == 0; pass++)
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) {
                    const char *p = pass == 0 ? sockets[i][j] : configs[i][j];
                    if (p && !found[i] && exists_under(host_root, p)) {
                        found[i] = true;
                        nfound++;
                    }
                }
        if (nfound == 0)
            return err_set(e, -ENOENT,
                           "no container runtime found under \"%s\" (no containerd, "
                           "CRI-O or docker socket or config)",
                           host_root ? host_root : "/");
        if (want && found[w]) {
            k = w;
        } else if (nfound > 1) {
            return err_set(e, -EINVAL,
                           "more than one container runtime under \"%s\" (%s%s%s) "
                           "and the node does not say which it uses",
                           host_root ? host_root : "/", found[0] ? "containerd " : "",
                           found[1] ? "cri-o " : "", found[2] ? "docker" : "");
        } else {
            k = found[0] ? RTCONFIG_CONTAINERD : found[1] ? RTCONFIG_CRIO : RTCONFIG_DOCKER;
        }
    }
    if (want && k != w)
        return err_set(
            e, -EINVAL,
            "the node runs %s%s%s%s but the policy's default runtime is "
            "%s: not configuring %s for GPUs",
            rtconfig_kind_name(k), node_runtime_version ? " (containerRuntimeVersion " : "",
            node_runtime_version ? node_runtime_version : "", node_runtime_version ? ")" : "",
            rtconfig_kind_name(w), rtconfig_kind_name(k));
    *ret = k;
    return 0;
}

/* ---- reload ------------------------------------------------------------------------------- */

static int peer_pid(const char *path, pid_t *ret)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    strlcpy_s(sa.sun_path, path, sizeof(sa.sun_path));
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return -errno;
    struct ucred cr;
    socklen_t n = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &n) < 0)
        return -errno;
    if (cr.pid <= 0)
        return -ESRCH;
    *ret = cr.pid;
    return 0;
}

/* `systemctl restart <unit>`, systemctl found in PATH, with this process's environment. */
static int run_systemctl(const char *unit, struct err *e)
{
    _cleanup_free_ char *path = NULL;
    int r = proc_find("systemctl", &path, e);
    if (r < 0)
        return r;
    const char *argv[] = {path, "restart", unit, NULL};
    return proc_run(argv, (const char *const *)environ, e);
}

/* Tells the runtime to load its config, as o->restart_mode says, and records the request. */
int rtconfig_reload(const char *root, enum rtconfig_kind k, const struct rtconfig_options *o,
                    const char *why, struct err *e)
{
    static const char *const units[] = {[RTCONFIG_CONTAINERD] = "containerd",
                                        [RTCONFIG_CRIO] = "crio",
                                        [RTCONFIG_DOCKER] = "docker"};
    int r = 0;
    char result[160] = "recorded";
    if (o->restart_mode == RTCONFIG_RESTART_SIGNAL) {
        pid_t pid = 0;
        r = -ENOENT;
        for (int j = 0; j < 2 && r < 0; j++) {
            _cleanup_(hpath_done) struct hpath sock = {0};
            struct err se = {0};
            r = hpath_get(root, sockets[k][j], &sock, &se);
            if (r == 0)
                r = peer_pid(sock.real, &pid);
        }
        if (r == 0 && kill(pid, SIGHUP) < 0)
            r = -errno;
        if (r == 0)
            snprintf(result, sizeof(result), "sighup pid=%d", (int)pid);
        else
            snprintf(result, sizeof(result), "failed error=\"%s\"", strerror(-r));
    } else if (o->restart_mode == RTCONFIG_RESTART_SYSTEMD) {
        struct err se = {0};
        r = run_systemctl(units[k], &se);
        snprintf(result, sizeof(result), r == 0 ? "restarted unit=%s" : "failed unit=%s", units[k]);
    }
    _cleanup_free_ char *dir = NULL;
    struct err de = {0};
    char ts[40];
    time_rfc3339(now_ms_real(), ts, sizeof(ts));
    if (state_dir(root, o, &dir, &de) == 0 && mkdir_p(dir, 0755) == 0) {
        _cleanup_free_ char *log = xasprintf("%s/reload.log", dir);
        _cleanup_close_ int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0)
            dprintf(fd, "%s runtime=%s action=%s mode=%s result=%s\n", ts, rtconfig_kind_name(k),
                    why, rtconfig_restart_mode_name(o->restart_mode), result);
    }
    if (r < 0)
        return err_errno(e, r, "tell %s to reload (%s)", rtconfig_kind_name(k),
                         rtconfig_restart_mode_name(o->restart_mode));
    return 0;
}

/* ---- configure, restore ------------------------------------------------------------------- */

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* CRI-O's drop-in dir: regular, visible files in name order, ours left out. */
static int crio_dropins(const char *root, const struct rtconfig_options *o, char ***ret,
                        size_t *ret_n, struct err *e)
{
    const char *ours = rtconfig_dropin_path(RTCONFIG_CRIO, o);
    _cleanup_free_ char *ddir = xstrdup(ours);
    *strrchr(ddir, '/') = '\0';
    _cleanup_(hpath_done) struct hpath full = {0};
    *ret = NULL;
    *ret_n = 0;
    int r = hpath_get(root, ddir, &full, e);
    if (r < 0)
        return r;
    _cleanup_(closedirp) DIR *d = opendir(full.real);
    if (!d)
        return errno == ENOENT ? 0 : err_errno(e, -errno, "open %s", full.shown);
    char **v = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || n >= 256)
            continue;
        char *p = xasprintf("%s/%s", ddir, de->d_name);
        if (strcmp(p, ours) == 0) {
            free(p);
            continue;
        }
        v = xrealloc(v, (n + 1) * sizeof(char *));
        v[n++] = p;
    }
    if (n)
        qsort(v, n, sizeof(char *), name_cmp);
    *ret = v;
    *ret_n = n;
    return 0;
}

static void strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* The config files of k in force, read (NULL data for one that does not exist). */
struct rtconfig_inputs {
    char *paths[258];
    char *data[258];
    struct rtconfig_text text[258];
    size_t n;
};

static void inputs_free(struct rtconfig_inputs *in)
{
    for (size_t i = 0; i < in->n; i++) {
        free(in->paths[i]);
        free(in->data[i]);
    }
    in->n = 0;
}

static int inputs_add(const char *root, struct rtconfig_inputs *in, const char *path, struct err *e)
{
    if (in->n >= ARRAY_SIZE(in->paths))
        return err_set(e, -E2BIG, "too many config files");
    _cleanup_(hpath_done) struct hpath h = {0};
    size_t len;
    int r = hpath_get(root, path, &h, e);
    if (r == 0)
        r = read_opt(h.real, &in->data[in->n], &len, e);
    if (r < 0)
        return r;
    in->paths[in->n] = steal_ptr(&h.shown);
    in->text[in->n] = (struct rtconfig_text){in->data[in->n], len};
    in->n++;
    return 0;
}

int rtconfig_prepare(enum rtconfig_kind k, struct err *e)
{
    return k == RTCONFIG_DOCKER ? 0 : tomlx_open(e);
}

int rtconfig_configure(const char *host_root, enum rtconfig_kind k,
                       const struct rtconfig_options *o, bool *ret_changed, struct err *e)
{
    struct rtconfig_inputs in = {0};
    struct sbuf out[2];
    const char *out_path[2] = {NULL, NULL};
    sbuf_init(&out[0], RTCONFIG_CONFIG_MAX);
    sbuf_init(&out[1], RTCONFIG_CONFIG_MAX);
    int r;
    const char *cfg = rtconfig_config_path(k, o);

    if (!o || !o->runtime_name || !o->runtime_path || !*o->runtime_name || !*o->runtime_path) {
        r = err_set(e, -EINVAL, "the runtime handler's name and path are required");
        goto out;
    }
    if (k == RTCONFIG_CONTAINERD) {
        r = inputs_add(host_root, &in, cfg, e);
        if (r == 0)
            r = rtconfig_containerd_edit(in.text[0], o, &out[0], &out[1], e);
        if (r < 0) {
            err_prefix(e, "%s", in.n ? in.paths[0] : cfg);
            goto out;
        }
        out_path[0] = cfg;
        out_path[1] = rtconfig_dropin_path(k, o);
    } else if (k == RTCONFIG_CRIO) {
        char **dropins;
        size_t nd;
        r = crio_dropins(host_root, o, &dropins, &nd, e);
        if (r < 0)
            goto out;
        r = inputs_add(host_root, &in, cfg, e);
        for (size_t i = 0; i < nd && r == 0; i++)
            r = inputs_add(host_root, &in, dropins[i], e);
        strv_free(dropins, nd);
        size_t bad = 0;
        if (r == 0)
            r = rtconfig_crio_edit(in.text, in.n, o, &out[1], &bad, e);
        if (r < 0) {
            err_prefix(e, "%s", bad < in.n ? in.paths[bad] : cfg);
            goto out;
        }
        out_path[1] = rtconfig_dropin_path(k, o);
    } else {
        r = inputs_add(host_root, &in, cfg, e);
        if (r == 0)
            r = rtconfig_docker_edit(in.text[0], o, &out[0], e);
        if (r < 0) {
            err_prefix(e, "%s", in.n ? in.paths[0] : cfg);
            goto out;
        }
        out_path[0] = cfg;
    }

    /* Everything parsed and edited: now write (the drop-in first, so the main file never
     * imports a file that is not there). */
    bool changed = false;
    for (int i = 1; i >= 0 && r == 0; i--)
        if (out_path[i])
            r = put_file(host_root, o, out_path[i], out[i].data ? out[i].data : "", out[i].len,
                         i == 1, &changed, e);
    if (r == 0 && changed)
        r = rtconfig_reload(host_root, k, o, "configure", e);
    if (r == 0 && ret_changed)
        *ret_changed = changed;
out:
    inputs_free(&in);
    sbuf_free(&out[0]);
    sbuf_free(&out[1]);
    return r;
}

/* One file of the uninstall: its paths, backups, text now, and what is done to it. */
struct undo_step {
    const char *path; /* host path */
    struct hpath h;
    struct backup b;
    char *cur;
    struct rtconfig_text now;
    struct sbuf text; /* the new text, for RTCONFIG_UNDO_EDIT */
    struct rtconfig_undo_file u;
};

static int step_read(const char *root, const char *dir, const char *path, struct undo_step *st,
                     struct err *e)
{
    size_t len = 0;
    st->path = path;
    sbuf_init(&st->text, RTCONFIG_CONFIG_MAX);
    st->u = (struct rtconfig_undo_file){.path = path, .what = RTCONFIG_UNDO_NONE};
    int r = hpath_get(root, path, &st->h, e);
    if (r == 0)
        r = backup_read(dir, path, &st->b, e);
    if (r == 0)
        r = read_opt(st->h.real, &st->cur, &len, e);
    st->now = (struct rtconfig_text){st->cur, len};
    if (r == 0 && !st->b.have)
        strlcpy_s(st->u.why, "gpuop has not changed it", sizeof(st->u.why));
    return r;
}

static void step_done(struct undo_step *st)
{
    hpath_done(&st->h);
    backup_done(&st->b);
    free(st->cur);
    sbuf_free(&st->text);
}

/* Carries the decision out; the backups go once the file is done with. */
static int step_apply(const char *dir, struct undo_step *st, bool *changed, struct err *e)
{
    int r = 0;
    if (!st->b.have)
        return 0;
    switch (st->u.what) {
    case RTCONFIG_UNDO_LEFT:
        return 0; /* the backups stay: a later restore can finish */
    case RTCONFIG_UNDO_NONE:
        break;
    case RTCONFIG_UNDO_ORIGINAL:
        r = replace(st->h.real, st->h.shown, st->b.base.data, st->b.base.len, e);
        break;
    case RTCONFIG_UNDO_EDIT:
        r = replace(st->h.real, st->h.shown, st->text.data ? st->text.data : "", st->text.len, e);
        break;
    case RTCONFIG_UNDO_REMOVE:
        if (unlink(st->h.real) < 0 && errno != ENOENT)
            r = err_errno(e, -errno, "remove %s", st->h.shown);
        break;
    }
    if (r < 0)
        return r;
    *changed = *changed || st->u.what != RTCONFIG_UNDO_NONE;
    return backup_drop(dir, st->path, e);
}

/* The state dir's status: what the last uninstall did, one line per file. */
static void write_status(const char *dir, enum rtconfig_kind k,
                         const struct rtconfig_restore_report *rep)
{
    char ts[40];
    time_rfc3339(now_ms_real(), ts, sizeof(ts));
    _cleanup_sbuf_ struct sbuf b;
    sbuf_init(&b, 8192);
    for (size_t i = 0; i < rep->n; i++) {
        const struct rtconfig_undo_file *f = &rep->files[i];
        sbuf_addf(&b, "%s runtime=%s action=restore path=%s result=%s", ts, rtconfig_kind_name(k),
                  f->path, rtconfig_undo_name(f->what));
        if (f->why[0])
            sbuf_addf(&b, " reason=\"%s\"", f->why);
        sbuf_adds(&b, "\n");
    }
    _cleanup_free_ char *path = xasprintf("%s/status", dir);
    struct err e = {0};
    if (sbuf_check(&b) == 0 && mkdir_p(dir, 0755) == 0)
        (void)file_write_atomic(path, b.data ? b.data : "", b.len, 0644, &e);
}

int rtconfig_restore(const char *host_root, enum rtconfig_kind k, const struct rtconfig_options *o,
                     struct rtconfig_restore_report *ret_report, struct err *e)
{
    struct rtconfig_restore_report rep = {0};
    struct undo_step st[2] = {0};
    size_t n = 0;
    _cleanup_free_ char *dir = NULL;
    bool changed = false;
    int r = state_dir(host_root, o, &dir, e);
    const char *main_path = k != RTCONFIG_CRIO ? rtconfig_config_path(k, o) : NULL;
    const char *dropin_path = rtconfig_dropin_path(k, o);
    struct undo_step *m = main_path ? &st[n++] : NULL, *d = dropin_path ? &st[n++] : NULL;
    if (r == 0 && m)
        r = step_read(host_root, dir, main_path, m, e);
    if (r == 0 && d)
        r = step_read(host_root, dir, dropin_path, d, e);

    /* Decide everything before anything is written: a file that does not parse changes
     * nothing. */
    if (r == 0 && m && m->b.have) {
        if (k == RTCONFIG_CONTAINERD)
            r = rtconfig_containerd_unedit(m->b.base, m->now, o, &m->text, &m->u, e);
        else
            r = rtconfig_docker_unedit(m->b.base, m->now, o, &m->text, &m->u, e);
        if (r < 0)
            err_prefix(e, "%s", m->h.shown);
    }
    if (r == 0 && d && d->b.have) {
        /* What gpuop would write now counts as its own too (a backup from before .written). */
        struct rtconfig_inputs in = {0};
        _cleanup_sbuf_ struct sbuf fresh, unused;
        sbuf_init(&fresh, RTCONFIG_CONFIG_MAX);
        sbuf_init(&unused, RTCONFIG_CONFIG_MAX);
        struct err fe = {0};
        bool have_fresh = false;
        if (!d->b.last.data && k == RTCONFIG_CONTAINERD && m)
            have_fresh = rtconfig_containerd_edit(m->now, o, &unused, &fresh, &fe) == 0;
        else if (!d->b.last.data && k == RTCONFIG_CRIO) {
            char **dropins = NULL;
            size_t nd = 0;
            int fr = crio_dropins(host_root, o, &dropins, &nd, &fe);
            if (fr == 0)
                fr = inputs_add(host_root, &in, rtconfig_config_path(k, o), &fe);
            for (size_t i = 0; i < nd && fr == 0; i++)
                fr = inputs_add(host_root, &in, dropins[i], &fe);
            strv_free(dropins, nd);
            have_fresh = fr == 0 && rtconfig_crio_edit(in.text, in.n, o, &fresh, NULL, &fe) == 0;
            inputs_free(&in);
        }
        struct rtconfig_text ft = {have_fresh ? (fresh.data ? fresh.data : "") : NULL, fresh.len};
        rtconfig_owned_unedit(d->b.base, d->now, d->b.last, ft, &d->u);
    }
    /* containerd's two go together: the config never imports a drop-in that is gone, and a
     * drop-in left in place stays imported. */
    if (r == 0 && k == RTCONFIG_CONTAINERD && m && d) {
        bool mleft = m->u.what == RTCONFIG_UNDO_LEFT, dleft = d->u.what == RTCONFIG_UNDO_LEFT;
        if (dleft && !mleft && m->u.what != RTCONFIG_UNDO_NONE) {
            m->u.what = RTCONFIG_UNDO_LEFT;
            strlcpy_s(m->u.why, "it imports the drop-in, which is left", sizeof(m->u.why));
        } else if (mleft && !dleft && d->u.what != RTCONFIG_UNDO_NONE) {
            d->u.what = RTCONFIG_UNDO_LEFT;
            strlcpy_s(d->u.why, "the config that imports it is left", sizeof(d->u.why));
        }
    }
    /* The main file first, so it never imports a drop-in that is gone. */
    for (size_t i = 0; i < n && r == 0; i++)
        r = step_apply(dir, &st[i], &changed, e);
    for (size_t i = 0; i < n; i++) {
        rep.files[rep.n++] = st[i].u;
        rep.left = rep.left || st[i].u.what == RTCONFIG_UNDO_LEFT;
    }
    bool any = false;
    for (size_t i = 0; i < n; i++)
        any = any || st[i].b.have;
    for (size_t i = 0; i < n; i++)
        step_done(&st[i]);
    if (r == 0 && any)
        write_status(dir, k, &rep);
    if (r == 0 && changed)
        r = rtconfig_reload(host_root, k, o, "restore", e);
    if (r == 0 && ret_report)
        *ret_report = rep;
    return r;
}

/* ---- check -------------------------------------------------------------------------------- */

static int check_containerd(const char *root, const struct rtconfig_options *o, struct err *e)
{
    const char *cfg = rtconfig_config_path(RTCONFIG_CONTAINERD, o);
    _cleanup_(hpath_done) struct hpath h = {0};
    _cleanup_free_ char *data = NULL;
    size_t len;
    int r = hpath_get(root, cfg, &h, e);
    if (r == 0)
        r = read_opt(h.real, &data, &len, e);
    if (r < 0)
        return r;
    const char *full = h.shown;
    if (!data)
        return err_set(e, -ENOENT, "%s: not there", full);
    _cleanup_(tomlx_freep) struct tomlx *m = NULL;
    if (tomlx_parse(data, len, &m, NULL, e) < 0)
        return err_prefix(e, "%s", full);
    int version;
    if (rtconfig_containerd_version(m, &version, e) < 0)
        return err_prefix(e, "%s", full);
    const char *plugin = rtconfig_containerd_plugin(version);
    /* containerd replaces a plugin section with the last imported file's that names it. */
    const struct tomlx *in_force =
        tomlx_type_at(m, TP("plugins", plugin)) == TOMLX_TABLE ? m : NULL;
    _cleanup_(tomlx_freep) struct tomlx *last = NULL;
    _cleanup_free_ char *from = xstrdup(full);
    int n = tomlx_str_array_len(m, TP("imports"));
    for (int i = 0; i < n; i++) {
        _cleanup_free_ char *imp = NULL;
        if (tomlx_str_array_get(m, TP("imports"), (size_t)i, &imp) < 0 || imp[0] != '/' ||
            strpbrk(imp, "*?["))
            continue;
        _cleanup_(hpath_done) struct hpath ih = {0};
        _cleanup_free_ char *idata = NULL;
        size_t ilen;
        if (hpath_get(root, imp, &ih, e) < 0 || read_opt(ih.real, &idata, &ilen, e) < 0 || !idata) {
            err_clear(e);
            continue;
        }
        const char *ifull = ih.shown;
        _cleanup_(tomlx_freep) struct tomlx *t = NULL;
        if (tomlx_parse(idata, ilen, &t, NULL, e) < 0)
            return err_prefix(e, "%s", ifull);
        if (tomlx_type_at(t, TP("plugins", plugin)) == TOMLX_TABLE) {
            tomlx_free(last);
            last = steal_ptr(&t);
            in_force = last;
            free(from);
            from = xstrdup(ifull);
        }
    }
    if (!in_force)
        return err_set(e, -ENOENT, "%s: no plugins.\"%s\" section", full, plugin);
    _cleanup_free_ char *bin = NULL;
    if (tomlx_get_str(in_force,
                      TP("plugins", plugin, "containerd", "runtimes", o->runtime_name, "options",
                         "BinaryName"),
                      &bin) < 0)
        return err_set(e, -ENOENT, "%s: no %s runtime with a BinaryName", from, o->runtime_name);
    if (strcmp(bin, o->runtime_path) != 0)
        return err_set(e, -ENOENT, "%s: the %s runtime runs \"%s\", not \"%s\"", from,
                       o->runtime_name, bin, o->runtime_path);
    bool cdi = false;
    if (o->enable_cdi &&
        (tomlx_get_bool(in_force, TP("plugins", plugin, "enable_cdi"), &cdi) < 0 || !cdi))
        return err_set(e, -ENOENT, "%s: CDI is not enabled (plugins.\"%s\".enable_cdi)", from,
                       plugin);
    return 0;
}

static int check_crio(const char *root, const struct rtconfig_options *o, struct err *e)
{
    struct rtconfig_inputs in = {0};
    char **dropins = NULL;
    size_t nd = 0;
    int r = crio_dropins(root, o, &dropins, &nd, e);
    if (r == 0)
        r = inputs_add(root, &in, rtconfig_config_path(RTCONFIG_CRIO, o), e);
    for (size_t i = 0; i < nd && r == 0; i++)
        r = inputs_add(root, &in, dropins[i], e);
    if (r == 0)
        r = inputs_add(root, &in, rtconfig_dropin_path(RTCONFIG_CRIO, o), e);
    strv_free(dropins, nd);
    char *path = NULL;
    for (size_t i = 0; i < in.n && r == 0; i++) {
        if (!in.data[i])
            continue;
        _cleanup_(tomlx_freep) struct tomlx *t = NULL;
        r = tomlx_parse(in.text[i].data, in.text[i].len, &t, NULL, e);
        if (r < 0) {
            err_prefix(e, "%s", in.paths[i]);
            break;
        }
        char *p = NULL;
        if (tomlx_get_str(t, TP("crio", "runtime", "runtimes", o->runtime_name, "runtime_path"),
                          &p) == 0) {
            free(path);
            path = p;
        }
    }
    if (r == 0 && !path)
        r = err_set(e, -ENOENT, "CRI-O under \"%s\": no %s runtime", root ? root : "/",
                    o->runtime_name);
    else if (r == 0 && strcmp(path, o->runtime_path) != 0)
        r = err_set(e, -ENOENT, "CRI-O: the %s runtime runs \"%s\", not \"%s\"", o->runtime_name,
                    path, o->runtime_path);
    free(path);
    inputs_free(&in);
    return r;
}

static int check_docker(const char *root, const struct rtconfig_options *o, struct err *e)
{
    _cleanup_(hpath_done) struct hpath h = {0};
    _cleanup_free_ char *data = NULL;
    size_t len;
    int r = hpath_get(root, rtconfig_config_path(RTCONFIG_DOCKER, o), &h, e);
    if (r == 0)
        r = read_opt(h.real, &data, &len, e);
    if (r < 0)
        return r;
    const char *full = h.shown;
    if (!data)
        return err_set(e, -ENOENT, "%s: not there", full);
    json_error_t je;
    json_t *doc = json_loadb(data, len, 0, &je);
    if (!doc)
        return err_set(e, -EINVAL, "%s: line %d, column %d: %s", full, je.line, je.column, je.text);
    const char *path = json_string_value(json_object_get(
        json_object_get(json_object_get(doc, "runtimes"), o->runtime_name), "path"));
    if (!path)
        r = err_set(e, -ENOENT, "%s: no runtimes.%s.path", full, o->runtime_name);
    else if (strcmp(path, o->runtime_path) != 0)
        r = err_set(e, -ENOENT, "%s: the %s runtime runs \"%s\", not \"%s\"", full, o->runtime_name,
                    path, o->runtime_path);
    else if (o->enable_cdi &&
             !json_is_true(json_object_get(json_object_get(doc, "features"), "cdi")))
        r = err_set(e, -ENOENT, "%s: CDI is not enabled (features.cdi)", full);
    json_decref(doc);
    return r;
}

int rtconfig_check(const char *host_root, enum rtconfig_kind k, const struct rtconfig_options *o,
                   struct err *e)
{
    switch (k) {
    case RTCONFIG_CONTAINERD:
        return check_containerd(host_root, o, e);
    case RTCONFIG_CRIO:
        return check_crio(host_root, o, e);
    case RTCONFIG_DOCKER:
        return check_docker(host_root, o, e);
    }
    return err_set(e, -EINVAL, "unknown runtime");
}

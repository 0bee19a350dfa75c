/* SPDX-License-Identifier: Apache-2.0 */
/* kl-net against the real kernel: nodes' namespaces reach each other and the host over the
 * bridge, and kl_net_free leaves no interface or namespace behind. Needs root. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "kl-net.h"

#define IO_MS 5000

static char bridge[16];
static char subnet[32];
static char node_a[64], node_b[64];

/* ---- sockets, made in a namespace of choice ----------------------------------------------- */

enum sock_op { OP_LISTEN, OP_CONNECT };

struct sock_job {
    const char *netns; /* NULL: the test's own (the host's) */
    enum sock_op op;
    const char *ip;
    uint16_t port;
    int fd; /* out */
};

static int sock_in_this_ns(struct sock_job *j)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(j->port)};
    if (inet_pton(AF_INET, j->ip, &sa.sin_addr) != 1)
        return -EINVAL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    if (j->op == OP_LISTEN) {
        int one = 1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4) < 0) {
            int r = -errno;
            close(fd);
            return r;
        }
    } else if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
        int r = -errno;
        close(fd);
        return r;
    }
    j->fd = fd;
    return 0;
}

static void *sock_thread(void *arg)
{
    struct sock_job *j = arg;
    j->fd = -1;
    if (j->netns) {
        int ns = open(j->netns, O_RDONLY | O_CLOEXEC);
        if (ns < 0 || setns(ns, CLONE_NEWNET) < 0) {
            if (ns >= 0)
                close(ns);
            return NULL;
        }
        close(ns);
    }
    if (sock_in_this_ns(j) < 0)
        j->fd = -1;
    return NULL;
}

static int sock_in(const char *netns, enum sock_op op, const char *ip, uint16_t port)
{
    struct sock_job j = {.netns = netns, .op = op, .ip = ip, .port = port, .fd = -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, sock_thread, &j), 0);
    pthread_join(t, NULL);
    return j.fd;
}

/* A connection from the namespace `from` to a listener in `to` at ip: a byte goes each way. */
static void assert_reaches(const char *from, const char *to, const char *ip, uint16_t port)
{
    int l = sock_in(to, OP_LISTEN, ip, port);
    assert_true(l >= 0);
    int c = sock_in(from, OP_CONNECT, ip, port);
    assert_true(c >= 0);
    struct pollfd p = {.fd = l, .events = POLLIN};
    assert_int_equal(poll(&p, 1, IO_MS), 1);
    int a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    assert_true(a >= 0);
    p = (struct pollfd){.fd = c, .events = POLLOUT};
    assert_int_equal(poll(&p, 1, IO_MS), 1);
    assert_int_equal(write(c, "x", 1), 1);
    p = (struct pollfd){.fd = a, .events = POLLIN};
    assert_int_equal(poll(&p, 1, IO_MS), 1);
    char b = 0;
    assert_int_equal(read(a, &b, 1), 1);
    assert_int_equal(b, 'x');
    assert_int_equal(write(a, "y", 1), 1);
    p = (struct pollfd){.fd = c, .events = POLLIN};
    assert_int_equal(poll(&p, 1, IO_MS), 1);
    assert_int_equal(read(c, &b, 1), 1);
    assert_int_equal(b, 'y');
    close(a);
    close(c);
    close(l);
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static bool iface_exists(const char *name)
{
    char p[160];
    int n = snprintf(p, sizeof(p), "/sys/class/net/%s", name);
    assert_true(n > 0 && (size_t)n < sizeof(p));
    return exists(p);
}

/* The bridge's ports: the nodes' veths. */
static size_t bridge_ports(char names[][16], size_t max)
{
    char p[128];
    snprintf(p, sizeof(p), "/sys/class/net/%s/brif", bridge);
    DIR *d = opendir(p);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < max) {
        if (de->d_name[0] == '.')
            continue;
        strlcpy_s(names[n++], de->d_name, 16);
    }
    closedir(d);
    return n;
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_bad_input(void **state)
{
    (void)state;
    struct kl_net *n = NULL;
    struct err e = {0};
    assert_int_equal(kl_net_new("klbr-name-too-long", subnet, &n, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "klbr-name-too-long"));
    assert_int_equal(kl_net_new(bridge, "198.18.0.0", &n, &e), -EINVAL);
    assert_int_equal(kl_net_new(bridge, "198.18.0.0/8", &n, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "/8"));
    assert_int_equal(kl_net_new(bridge, "198.18.0.0/30", &n, &e), -EINVAL);
    assert_int_equal(kl_net_new(bridge, "198.18.0.1/24", &n, &e), -EINVAL);
    assert_int_equal(kl_net_new(bridge, "198.18.300.0/24", &n, &e), -EINVAL);
    assert_null(n);
    assert_false(iface_exists(bridge));
}

static void test_two_nodes(void **state)
{
    (void)state;
    struct kl_net *n = NULL;
    struct err e = {0};
    assert_int_equal(kl_net_new(bridge, subnet, &n, &e), 0);
    assert_true(iface_exists(bridge));
    char *pa = NULL, *ia = NULL, *pb = NULL, *ib = NULL;
    assert_int_equal(kl_net_add_node(n, node_a, 0, &pa, &ia, &e), 0);
    assert_int_equal(kl_net_add_node(n, node_b, 1, &pb, &ib, &e), 0);
    assert_int_equal(kl_net_add_node(n, node_a, 2, &(char *){NULL}, &(char *){NULL}, &e), -EEXIST);
    char want[128];
    /* named for the bridge too: another cluster's node of the same name has its own */
    assert_true(strncmp(pa, "/run/netns/kl", 13) == 0);
    snprintf(want, sizeof(want), "-%s", node_a);
    assert_true(strlen(pa) == 13 + 4 + strlen(want) && strcmp(pa + 17, want) == 0);
    assert_true(exists(pa) && exists(pb));
    /* the bridge holds the first address, node i the (i + 2)th */
    char base[32];
    snprintf(base, sizeof(base), "%s", subnet);
    *strrchr(base, '.') = '\0';
    snprintf(want, sizeof(want), "%s.1", base);
    assert_string_equal(kl_net_host_ip(n), want);
    snprintf(want, sizeof(want), "%s.2", base);
    assert_string_equal(ia, want);
    snprintf(want, sizeof(want), "%s.3", base);
    assert_string_equal(ib, want);

    char ports[8][16];
    size_t np = bridge_ports(ports, 8);
    assert_int_equal(np, 2);

    assert_reaches(NULL, pa, ia, 17001);                /* host -> node a */
    assert_reaches(pa, pb, ib, 17002);                  /* node a -> node b */
    assert_reaches(pa, NULL, kl_net_host_ip(n), 17003); /* node a -> host */

    kl_net_free(n);
    assert_false(iface_exists(bridge));
    for (size_t i = 0; i < np; i++)
        assert_false(iface_exists(ports[i]));
    assert_false(exists(pa));
    assert_false(exists(pb));
    free(pa);
    free(ia);
    free(pb);
    free(ib);
}

/* A run killed without cleaning up leaves its bridge, veths and namespaces: the next run with
 * the same names removes them and makes its own. */
static void test_stale_run(void **state)
{
    (void)state;
    struct kl_net *old = NULL, *n = NULL;
    struct err e = {0};
    assert_int_equal(kl_net_new(bridge, subnet, &old, &e), 0);
    char *p0 = NULL, *i0 = NULL, *p1 = NULL, *i1 = NULL, *pb = NULL, *ib = NULL;
    assert_int_equal(kl_net_add_node(old, node_a, 0, &p0, &i0, &e), 0);
    assert_int_equal(kl_net_add_node(old, node_b, 1, &pb, &ib, &e), 0);
    char old_ports[8][16];
    size_t nold = bridge_ports(old_ports, 8);
    assert_int_equal(nold, 2);
    assert_int_equal(kl_net_new(bridge, subnet, &n, &e), 0);
    /* the new run has no node b: its veth went with the old bridge all the same */
    for (size_t i = 0; i < nold; i++)
        assert_false(iface_exists(old_ports[i]));
    assert_int_equal(kl_net_add_node(n, node_a, 0, &p1, &i1, &e), 0);
    assert_string_equal(p0, p1);
    char ports[8][16];
    size_t np = bridge_ports(ports, 8);
    assert_int_equal(np, 1);
    assert_reaches(NULL, p1, i1, 17004);
    kl_net_free(n);
    assert_false(iface_exists(bridge));
    assert_false(iface_exists(ports[0]));
    assert_false(exists(p1));
    assert_true(exists(pb)); /* b's namespace: the old run's to remove */
    kl_net_free(old);        /* the rest of what it made is gone already: nothing fails */
    assert_false(exists(pb));
    free(pb);
    free(ib);
    free(p0);
    free(i0);
    free(p1);
    free(i1);
}

int main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "test-kl-net: needs root (network namespaces, a bridge): skipped\n");
        return 77;
    }
    /* names and a /24 of 198.19.0.0/16 (benchmark test beds) of this run's own, so runs in
     * parallel never share a bridge, a namespace or a route */
    unsigned id = (unsigned)getpid();
    snprintf(bridge, sizeof(bridge), "kltb%u", id % 100000);
    snprintf(subnet, sizeof(subnet), "198.19.%u.0/24", id % 256);
    snprintf(node_a, sizeof(node_a), "kltest-%u-a", id);
    snprintf(node_b, sizeof(node_b), "kltest-%u-b", id);
    /* root without the capabilities (an unprivileged container) cannot make namespaces */
    struct kl_net *probe = NULL;
    struct err e = {0};
    int r = kl_net_new(bridge, subnet, &probe, &e);
    if (r == -EPERM || r == -EACCES) {
        fprintf(stderr, "test-kl-net: %s: skipped\n", e.msg);
        return 77;
    }
    kl_net_free(probe);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_two_nodes),
        cmocka_unit_test(test_stale_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * scrape-latency: GET /metrics N times over one keep-alive connection (as Prometheus does) and
 * print p50/p90/p99/max latency in microseconds and the body size.
 * usage: scrape-latency PORT N [new]   ("new": a fresh connection per request)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        perror("connect");
        exit(1);
    }
    return fd;
}

static char buf[8 << 20];

/* One request/response; returns the body length. */
static long get(int fd)
{
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n";
    if (write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1)) {
        perror("write");
        exit(1);
    }
    size_t have = 0;
    long body = -1, hdr = -1;
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof(buf) - have - 1);
        if (n <= 0) {
            fprintf(stderr, "read: connection closed\n");
            exit(1);
        }
        have += (size_t)n;
        buf[have] = '\0';
        if (hdr < 0) {
            char *e = strstr(buf, "\r\n\r\n");
            if (!e)
                continue;
            hdr = e + 4 - buf;
            char *cl = strcasestr(buf, "Content-Length:");
            if (!cl || cl > e) {
                fprintf(stderr, "no Content-Length\n");
                exit(1);
            }
            body = strtol(cl + 15, NULL, 10);
        }
        if ((long)have >= hdr + body)
            return body;
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s PORT N [new]\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]), n = atoi(argv[2]);
    int fresh = argc > 3 && strcmp(argv[3], "new") == 0;
    double *lat = calloc((size_t)n, sizeof(double));
    int fd = fresh ? -1 : dial(port);
    long size = 0;
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        if (fresh)
            fd = dial(port);
        size = get(fd);
        if (fresh) {
            close(fd);
            fd = -1;
        }
        lat[i] = now_us() - t0;
    }
    qsort(lat, (size_t)n, sizeof(double), cmp);
    printf("n=%d bytes=%ld p50_us=%.1f p90_us=%.1f p99_us=%.1f max_us=%.1f\n", n, size, lat[n / 2],
           lat[n * 9 / 10], lat[n * 99 / 100], lat[n - 1]);
    free(lat);
    if (fd >= 0)
        close(fd);
    return 0;
}

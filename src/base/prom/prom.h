/* SPDX-License-Identifier: Apache-2.0 */
/*
 * prom: Prometheus text exposition 0.0.4 and OpenMetrics 1.0.0, written into a struct sbuf.
 *
 * Pure: no I/O, no sockets, no clock; bytes out only, so the exporter's core, the operator and
 * kubesim write metrics the same way and tests compare strings. Serving the result is the
 * caller's business (src/edge/http).
 *
 * Two layers:
 *  - the primitives (prom_write_family, prom_write_value, prom_escape_label_value, ...) return
 *    0 or -ENOBUFS when the buffer's limit would be passed (GPUOP_WUR: a truncated exposition
 *    is an error);
 *  - struct prom_writer, a sticky-error writer over the primitives for code that writes many
 *    lines: its error is the buffer's own sticky error (struct sbuf), so each call is a no-op
 *    once a write has failed, and prom_writer_finish() (which also writes OpenMetrics'
 *    "# EOF") returns the first error, so one check covers the whole page.
 *
 * Thread-safety: none needed; every function works on the caller's buffer only.
 */
#ifndef GPUOP_PROM_H
#define GPUOP_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define PROM_CT_TEXT        "text/plain; version=0.0.4; charset=utf-8"
#define PROM_CT_OPENMETRICS "application/openmetrics-text; version=1.0.0; charset=utf-8"

enum prom_format { PROM_FORMAT_TEXT = 0, PROM_FORMAT_OPENMETRICS };
enum prom_type { PROM_GAUGE = 0, PROM_COUNTER, PROM_UNTYPED, PROM_HISTOGRAM };

/* Which format a scraper asked for in its Accept header: OpenMetrics when it lists
 * application/openmetrics-text with a q-value at least that of text/plain (and > 0). */
enum prom_format prom_negotiate(const char *accept);
/* The Content-Type of a format (static string). */
const char *prom_content_type(enum prom_format f);

/* A valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) / label name ([a-zA-Z_][a-zA-Z0-9_]*). */
bool prom_valid_metric_name(const char *name);
bool prom_valid_label_name(const char *name);

/* ---- primitives: 0, or -ENOBUFS when the buffer's limit would be passed ------------------- */

/* Appends v escaped for a label value (\\, \", \n). */
GPUOP_WUR int prom_escape_label_value(struct sbuf *b, const char *v);

/*
 * Writes the # HELP and # TYPE lines of a metric family whose samples are named `name`.
 * OpenMetrics names a counter family without its "_total" sample suffix; a counter whose name
 * has no such suffix (dcgm-exporter's DCGM_FI_* counters) is declared `unknown` there, so the
 * sample names stay identical in both formats. Help text is escaped as the format requires.
 */
GPUOP_WUR int prom_write_family(struct sbuf *b, enum prom_format f, const char *name,
                                enum prom_type t, const char *help);
/* Writes a sample value: integers exactly, others with up to 17 significant digits, NaN/Inf
 * spelt as Prometheus expects. */
GPUOP_WUR int prom_write_value(struct sbuf *b, double v);
/* The "# EOF\n" terminator OpenMetrics requires (nothing for the text format). */
GPUOP_WUR int prom_write_eof(struct sbuf *b, enum prom_format f);

struct prom_label {
    const char *name;  /* a valid label name (not checked here: names are the caller's constants) */
    const char *value; /* any UTF-8; escaped on output; NULL is written as "" */
};

/* Writes `name{l1="v1",...} value\n` (no braces without labels). */
GPUOP_WUR int prom_write_sample(struct sbuf *b, const char *name, const struct prom_label *labels,
                                size_t n_labels, double v);
/* The same with an exact 64-bit integer value (counters past 2^53). */
GPUOP_WUR int prom_write_sample_u64(struct sbuf *b, const char *name,
                                    const struct prom_label *labels, size_t n_labels, uint64_t v);

/*
 * Writes the samples of one histogram series: name_bucket{...,le="<bound>"} for each bound
 * (ascending, cumulative counts) plus le="+Inf" (= count), then name_sum and name_count.
 * The family lines are written separately with prom_write_family(..., PROM_HISTOGRAM, ...).
 * -EINVAL when bounds are not strictly ascending or counts decrease or exceed count.
 */
GPUOP_WUR int prom_write_histogram(struct sbuf *b, const char *name,
                                   const struct prom_label *labels, size_t n_labels,
                                   const double *bounds, const uint64_t *cumulative,
                                   size_t n_bounds, double sum, uint64_t count);

/* ---- sticky-error writer ------------------------------------------------------------------- */

struct prom_writer {
    struct sbuf *out; /* its sticky error is the writer's: the first failure of any write */
    enum prom_format format;
};

/* out is the caller's buffer (with its limit); nothing is allocated. */
void prom_writer_init(struct prom_writer *w, struct sbuf *out, enum prom_format f);
void prom_family(struct prom_writer *w, const char *name, enum prom_type t, const char *help);
void prom_sample(struct prom_writer *w, const char *name, const struct prom_label *labels,
                 size_t n_labels, double v);
void prom_sample_u64(struct prom_writer *w, const char *name, const struct prom_label *labels,
                     size_t n_labels, uint64_t v);
/* A family with one unlabelled sample: the common case of a process-level metric. */
void prom_metric(struct prom_writer *w, const char *name, enum prom_type t, const char *help,
                 double v);
void prom_metric_u64(struct prom_writer *w, const char *name, enum prom_type t, const char *help,
                     uint64_t v);
void prom_histogram(struct prom_writer *w, const char *name, const struct prom_label *labels,
                    size_t n_labels, const double *bounds, const uint64_t *cumulative,
                    size_t n_bounds, double sum, uint64_t count);
/* Writes "# EOF" for OpenMetrics and returns the first error (0 when the page is complete);
 * sbuf_check_err(w->out, ...) words it. */
GPUOP_WUR int prom_writer_finish(struct prom_writer *w);

#endif

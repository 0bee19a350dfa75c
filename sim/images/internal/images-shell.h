/* SPDX-License-Identifier: Apache-2.0 */
/* The programs of build/sim-image (see simimage.h), and what they share. Each returns the exit
 * code of the program it stands in for. */
#ifndef GPUOP_IMAGES_SHELL_H
#define GPUOP_IMAGES_SHELL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "simnvml.h"
#include "util.h"

int simimg_driver_main(int argc, char **argv);
int simimg_smi_main(int argc, char **argv);
int simimg_cuda_sample_main(int argc, char **argv);
int simimg_rmmod_main(int argc, char **argv);
int simimg_operand_main(int argc, char **argv);
int simimg_gds_main(int argc, char **argv);         /* nvidia-gds-driver (modules.c) */
int simimg_gdrcopy_main(int argc, char **argv);     /* nvidia-gdrcopy-driver */
int simimg_lsmod_main(int argc, char **argv);       /* lsmod */
int simimg_mps_control_main(int argc, char **argv); /* nvidia-cuda-mps-control (mps.c) */

/* What an image's program prints, as the real one does: a line on stdout, or on stderr after
 * stdout is flushed (so the two keep their order in the container's log). */
void simimg_say(const char *fmt, ...) GPUOP_PRINTF(1, 2);
void simimg_fail(const char *fmt, ...) GPUOP_PRINTF(1, 2);

/* Blocks SIGTERM, SIGINT, SIGQUIT and SIGHUP and returns a signalfd reading them (-errno). */
int simimg_signals_open(void);
/* Waits ms (or until a signal arrives on sigfd); true and *ret_sig when one did. */
bool simimg_signal_wait(int sigfd, uint64_t ms, int *ret_sig);
/* A seconds value from env name (decimals allowed, at most a day); def when unset. */
int simimg_env_seconds(const char *name, double def, uint64_t *ret_ms, struct err *e);
/* The node's shared GPU state (GPUOP_SIM_FLEET, GPUOP_SIM_STATE); 0 and NULLs when the node has
 * no fleet (a CPU node). */
int simimg_state_open(struct sim_fleet **ret_fleet, struct sim_store **ret_store, struct err *e);

/* Takes the node's nvidia module for an unload (the driver container's, rmmod): 1 with *ret_fd
 * holding it until closed (sim_module_lock; -1 when the root has no refcnt file), 0 when it is
 * "in use": a live process holds one of the node's GPUs or a reference on the module (an NVML
 * client, sim_module_get). */
int simimg_module_take(const char *root, int *ret_fd, struct err *e);

#endif

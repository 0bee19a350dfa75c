/* SPDX-License-Identifier: Apache-2.0 */
/* nvidia-operand: a stand-in for an operand of NVIDIA's GPU Operator (its toolkit, feature
 * discovery, exporter, MIG manager or validator) on a simulated node, for the takeover tests: it
 * says what it stands in for, does nothing else, and exits 0 on SIGTERM, SIGINT, SIGQUIT or
 * SIGHUP. NVIDIA's driver container and device plugin have stand-ins that act (nvidia-driver;
 * gpuop's own device plugin, which speaks the same kubelet API). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "images-shell.h"

int simimg_operand_main(int argc, char **argv)
{
    int fd = simimg_signals_open();
    if (fd < 0) {
        fprintf(stderr, "nvidia-operand: signals: %s\n", strerror(-fd));
        return 1;
    }
    printf("nvidia-operand: standing in for NVIDIA's %s; waiting for a signal\n",
           argc > 1 ? argv[1] : "operand");
    fflush(stdout);
    int sig = 0;
    while (!simimg_signal_wait(fd, 3600 * 1000, &sig))
        ;
    printf("nvidia-operand: %s, exiting\n", strsignal(sig));
    close(fd);
    return 0;
}

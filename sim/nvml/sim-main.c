/* SPDX-License-Identifier: Apache-2.0 */
/* build/gpuop-sim: the simulated fleet's control, on the component runtime (sim-cli.c). */
#include "svc.h"

extern const struct svc_component sim_component;

int main(int argc, char **argv)
{
    return svc_main(&sim_component, argc, argv);
}

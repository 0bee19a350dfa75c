#!/usr/bin/env bash
# make demo: the main job on simulated GPUs.
set -euo pipefail
cd "$(dirname "$0")/.."
./build/gpuop --help

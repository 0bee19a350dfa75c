#!/bin/bash
# kubelet-sim's containers under chroot: the container runtime's tests (test-kl-runtime: start,
# stop, and kl_container_exec running a probe that reads a file only the container's root holds)
# run inside a chroot whose root is a bind mount (as a fresh Debian root entered with chroot is).
# An exec that joined the container's mount namespace without entering the container's root
# lands at the namespace's root mount, outside the chroot, and fails there.
# Usage: chroot-test.sh TEST-KL-RUNTIME [COMMAND...]  (COMMAND: run that in the chroot instead)
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_root "mount namespaces and chroot"
need_cmd unshare
bin=$1; shift
[ -x "$bin" ] || fail "$bin: not an executable"
mkdir "$T/root"
# In a mount namespace of its own (nothing leaks to the host): the whole tree bound onto the
# chroot's folder, which makes that folder a mount point, then chroot into it.
unshare --mount --propagation private -- /bin/sh -ec '
    mount --rbind / "$1/root"
    mount --make-rprivate "$1/root"
    dir=$1; shift
    exec chroot "$dir/root" /bin/sh -c "cd / && exec \"\$@\"" sh "$@"
' sh "$T" "${@:-$bin}"
rc=$?
[ $rc = 0 ] && echo "ok: ran under chroot: ${*:-$bin}"
exit $rc

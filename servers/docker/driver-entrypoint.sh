#!/bin/sh
# The driver container's entrypoint. Docker mounts /proc/sys read-only in a container that is
# not privileged; the driver sets per-host TCP sysctls in the testbed's namespaces through it
# (it holds CAP_SYS_ADMIN for that, see docker-compose.yml), so make it writable first.
if grep -q ' /proc/sys proc ro,' /proc/self/mounts; then
    mount -o remount,rw /proc/sys 2>/dev/null ||
        echo "xfrbench-driver: warning: /proc/sys stays read-only (per-host sysctls will fail)" >&2
fi
exec "$@"

"""The compose backend: the testbed's hosts are containers of one compose project.

The containers provide the file systems (server binaries of a chosen Debian release) and the
network namespaces; the driver stays the runner. It names each container's namespace with
`ip netns attach` so every `ip netns exec NAME` and `socket_in(NAME)` works unchanged, and
starts servers inside the containers with nsenter (see `project.py`). Images are built
locally from debootstrapped Debian bases (`images.py`); `daemon.py` starts dockerd when none
runs.
"""

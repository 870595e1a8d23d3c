"""A lab of "remote" hosts on this machine, for tests and demos of the inventory backend.

    lab = lab_up(3, sites=("near", "far"))   # 1 primary + 3 secondaries, each its own sshd
    lab.inventory                             # the Ansible inventory that names them
    lab_down(lab.lab_id)

Each host is a network namespace (testbed/'s plumbing: a router in the middle, one veth per
host, and one more to this machine's own namespace for the controller) running an sshd of
its own with a generated host key, reached with a generated client key. Once it is up the
harness reaches its hosts only as it would reach real machines: through Ansible and SSH.
"""

from harness.lab.build import Lab, find_lab, lab_down, lab_holding, lab_up

__all__ = ["Lab", "find_lab", "lab_down", "lab_holding", "lab_up"]

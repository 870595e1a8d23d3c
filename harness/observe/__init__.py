"""Live observation of the servers: cgroup CPU and memory, TCP sockets (sock_diag,
/proc), and the sampler that writes samples.jsonl.
"""

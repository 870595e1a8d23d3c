"""Stop what one xfrbench run recorded on this host, and nothing else (run by Ansible).

Usage: python3 xfrbench_clean.py RUN_DIR. Each RUN_DIR/pids/<server>.json holds a pid, its
start time (field 22 of /proc/PID/stat) and the cgroups made for it: a pid is signalled
only while its start time matches (a recycled pid is left alone), then its groups go.
The NFQUEUE rules in RUN_DIR/link-rules.json go first
(remove_rules), then the pids (the run's linkem among them). Standalone on purpose: it runs where the agent may never have been unpacked.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def start_time(pid):
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return None if fields[0] == "Z" else int(fields[19])


def stop(pid, start):
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        if start is None or start_time(pid) != start:
            return "gone"
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return "gone"
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if start_time(pid) != start:
                return "stopped" if sig == signal.SIGTERM else "killed"
            time.sleep(0.05)
    return "survived"


def remove_rules(run_dir):
    """The NFQUEUE rules the run's linkem was fed by (link-rules.json, written before they
    were added), each while it is there: first, as a rule without its linkem drops what it
    queues."""
    path = Path(run_dir, "link-rules.json")
    try:
        rules = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    done = []
    for rule in rules:
        argv = [rule["tool"], "-w", "-t", rule["table"], "-D", rule["chain"], *rule["rule"]]
        while subprocess.run(argv, capture_output=True).returncode == 0:  # added twice: both
            done.append(" ".join(argv))
    path.unlink()
    return done


def main(run_dir):
    done = remove_rules(run_dir)
    # The agent first: it stops its own servers; then whatever is still recorded.
    paths = sorted(Path(run_dir, "pids").glob("*.json"), key=lambda p: p.name != "agent.json")
    for path in paths:
        if not path.exists():
            continue
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if "pid" in record:
            done.append(f"{record['name']} pid {record['pid']} {stop(record['pid'], record.get('start'))}")
        for group in reversed(record.get("cgroup", [])):
            if os.path.basename(os.path.dirname(group)) != "xfrbench" and not group.endswith("/xfrbench"):
                continue
            try:
                os.rmdir(group)
                done.append(f"cgroup {group}")
            except OSError:
                pass  # still used by another group, or gone
        if path.exists():
            path.unlink()
    print(json.dumps(done))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""A run's TCP settings on this host, and this host's own put back (run by Ansible).

Usage: python3 xfrbench_sysctl.py RUN_DIR set KEY=VALUE ...
       python3 xfrbench_sysctl.py RUN_DIR restore
`set` first writes each key's value as the host had it into RUN_DIR/sysctl-restore.json
(once per key, before anything changes, so a killed run can still be put back), puts back
those an earlier visit set that this one does not, then sets this visit's. `restore`
writes them all back (teardown.yml runs it before the folder goes).
Prints what it did as JSON. Standalone on purpose: it runs where the agent may never run.
"""

import json
import os
import sys
from pathlib import Path


def proc_path(key):
    return Path("/proc/sys", *key.split("."))


def read(key):
    return " ".join(proc_path(key).read_text().split())


def write(key, value):
    proc_path(key).write_text(str(value) + "\n")


def save(path, values):
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(values, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def main(run_dir, action, pairs):
    record = Path(run_dir, "sysctl-restore.json")
    before = json.loads(record.read_text()) if record.exists() else {}
    done = []
    if action == "set":
        wanted = dict(pair.split("=", 1) for pair in pairs)
        for key in wanted:
            before.setdefault(key, read(key))
        record.parent.mkdir(parents=True, exist_ok=True)
        save(record, before)
        for key, value in before.items():
            if key not in wanted and read(key) != " ".join(value.split()):
                write(key, value)
                done.append(f"{key} = {value} (the host's)")
        for key, value in wanted.items():
            try:
                write(key, value)
            except OSError as exc:
                print(json.dumps({"error": f"{key} = {value}: {exc.strerror}"}))
                return 1
            done.append(f"{key} = {read(key)}")
    elif action == "restore":
        for key, value in before.items():
            if read(key) != " ".join(value.split()):
                write(key, value)
                done.append(f"{key} = {value}")
        record.unlink(missing_ok=True)
    print(json.dumps(done))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))

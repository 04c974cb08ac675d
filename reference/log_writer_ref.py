#!/usr/bin/env python3
"""An independent commitment-log writer, from docs/log.md only (python3 + the openssl CLI).

    log_writer_ref.py LOG SIGNING_KEY.pem LOSS SECONDS [TASK_ID]

Rewrites every record of LOG with metrics.loss = LOSS and metrics.seconds = SECONDS (Python
floats, any value), and task_id = TASK_ID when given, re-chains `prev` and re-signs each BODY
with the Ed25519 key. BODY is
json.dumps with sorted keys, no whitespace and Python's float repr: docs/log.md's spelling.
"""
import hashlib
import json
import subprocess
import sys
import tempfile


def sign(body, key):
    with tempfile.NamedTemporaryFile() as f:
        f.write(body)
        f.flush()
        return subprocess.run(["openssl", "pkeyutl", "-sign", "-inkey", key, "-rawin", "-in", f.name],
                              check=True, capture_output=True).stdout.hex()


def main(path, key, loss, seconds, task_id=None):
    prev, out = "0" * 64, b""
    for line in open(path, "rb").read().split(b"\n")[:-1]:
        record = json.loads(line.partition(b"\t")[0])
        record["metrics"].update(loss=float(loss), seconds=float(seconds))
        if task_id is not None:
            record["task_id"] = task_id
        record["prev"] = prev
        body = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        line = body + b"\t" + sign(body, key).encode() + b"\n"
        prev, out = hashlib.sha256(line).hexdigest(), out + line
    open(path, "wb").write(out)


if __name__ == "__main__":
    main(*sys.argv[1:])

#!/usr/bin/env python3
"""Check a veritrain commitment log's chain with the Python standard library (docs/log.md).

    log_check.py LOG [--task-id HEX] [--extract EPOCH DIR]

Checks that every line is BODY, a tab, SIGNATURE (128 hex digits) and a newline; that epochs
run 0, 1, 2, ...; that one task_id and one signer appear throughout; and that each record's
"prev" is the SHA-256 of the previous line, newline included (all zeros for epoch 0).
The standard library has no Ed25519, so signatures are left to openssl: --extract writes
DIR/body, DIR/sig and DIR/signer.pem of one epoch, then

    openssl pkeyutl -verify -pubin -inkey DIR/signer.pem -rawin -in DIR/body -sigfile DIR/sig

Exit status: 0 chain intact, 1 chain broken, 2 unreadable input.
"""
import argparse, base64, hashlib, json, os, sys

# DER SubjectPublicKeyInfo header of an Ed25519 key (RFC 8410); the 32 raw key bytes follow.
ED25519_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")


def fail(message, code=1):
    print(message, file=sys.stderr)
    sys.exit(code)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("--task-id", help="the task_id every record must name")
    ap.add_argument("--extract", nargs=2, metavar=("EPOCH", "DIR"))
    args = ap.parse_args()
    try:
        data = open(args.log, "rb").read()
    except OSError as e:
        fail(f"{args.log}: {e}", 2)
    *lines, tail = data.split(b"\n")  # tail: bytes after the last newline, a torn append
    prev, task, signer = "0" * 64, args.task_id, None
    for epoch, line in enumerate(lines):
        where = f"{args.log}: epoch {epoch} (line {epoch + 1})"
        body, tab, sig = line.partition(b"\t")
        if not tab or len(sig) != 128:
            fail(f"{where}: not BODY<tab>SIGNATURE")
        try:
            rec = json.loads(body)
        except ValueError as e:
            fail(f"{where}: body is not JSON: {e}")
        if not isinstance(rec, dict):
            fail(f"{where}: body is not a JSON object")
        if rec.get("epoch") != epoch:
            fail(f"{where}: commits epoch {rec.get('epoch')}")
        task = task or rec.get("task_id")
        if rec.get("task_id") != task:
            fail(f"{where}: task_id {rec.get('task_id')}, expected {task}")
        signer = signer or rec.get("signer")
        if rec.get("signer") != signer:
            fail(f"{where}: signer {rec.get('signer')}, expected {signer}")
        if rec.get("prev") != prev:
            fail(f"{where}: prev {rec.get('prev')}, but the previous line hashes to {prev}")
        prev = hashlib.sha256(line + b"\n").hexdigest()
        if args.extract and int(args.extract[0]) == epoch:
            out = args.extract[1]
            os.makedirs(out, exist_ok=True)
            open(os.path.join(out, "body"), "wb").write(body)
            open(os.path.join(out, "sig"), "wb").write(bytes.fromhex(sig.decode()))
            der = ED25519_SPKI_PREFIX + bytes.fromhex(rec["signer"])
            pem = "-----BEGIN PUBLIC KEY-----\n" + base64.b64encode(der).decode() + "\n-----END PUBLIC KEY-----\n"
            open(os.path.join(out, "signer.pem"), "w").write(pem)
    if args.extract and int(args.extract[0]) >= len(lines):
        fail(f"{args.log}: has no epoch {args.extract[0]}", 2)
    if tail:
        print(f"{args.log}: warning: incomplete final record ({len(tail)} bytes, epoch {len(lines)})",
              file=sys.stderr)
    print(f"{args.log}: {len(lines)} records, chain intact, task {task}, head {prev}")


if __name__ == "__main__":
    main()

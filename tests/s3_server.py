"""A real S3-compatible server for tests: moto's standalone server (`moto[server]`), started
as a separate process on a free localhost port, logging every request it serves to a file so
tests can count listings and reads."""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
import urllib.request

from tb_server import free_port

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Credentials moto accepts; nothing leaves this machine: every client is pointed at the server
# (AWS_ENDPOINT_URL for boto3/s3fs, S3_ENDPOINT for TensorBoard's own S3 support).
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                    "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}


class S3Server:
    def __init__(self, endpoint: str, log_path: str):
        self.endpoint = endpoint
        self.log_path = log_path

    def env(self) -> dict:
        return {**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint, "S3_ENDPOINT": self.endpoint}

    def requests(self, settle_s: float = 0.3, most_s: float = 5.0) -> list[str]:
        """Request lines served so far ("GET /bucket?list-type=2&prefix=... HTTP/1.1"). The
        server logs a request after answering it: the log is read until it has not grown for
        `settle_s`, so a request just answered is counted."""
        deadline = time.monotonic() + most_s
        text, since = None, time.monotonic()
        while True:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                now = f.read()
            if now != text:
                text, since = now, time.monotonic()
            elif time.monotonic() - since >= settle_s or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # werkzeug colours some lines when click is there
        return re.findall(r'"((?:GET|HEAD|PUT|POST|DELETE) [^"]*)"', text)

    def listings(self, bucket: str) -> list[str]:
        return [r for r in self.requests() if re.match(rf"GET /{re.escape(bucket)}/?\?", r)]

    def client(self):
        import boto3
        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def upload_tree(self, local_dir: str, bucket: str, prefix: str):
        client = self.client()
        for root, _, files in os.walk(local_dir):
            for name in files:
                path = os.path.join(root, name)
                key = prefix + os.path.relpath(path, local_dir).replace(os.sep, "/")
                client.upload_file(path, bucket, key)


@contextlib.contextmanager
def moto_server():
    port = free_port()
    out_dir = os.path.join(REPO, "test-output")
    os.makedirs(out_dir, exist_ok=True)
    log_path = os.path.join(out_dir, f"moto_server_{port}.log")
    log = open(log_path, "w")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})  # request log at once
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"moto server exited with {proc.returncode}; see {log_path}")
            try:
                with urllib.request.urlopen(endpoint + "/moto-api/", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not answer; see {log_path}")
                time.sleep(0.2)
        yield S3Server(endpoint, log_path)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()

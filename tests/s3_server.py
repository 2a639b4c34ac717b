"""A real S3-compatible server for tests: moto's standalone server (`moto[server]`), started
as a separate process on a free localhost port, logging every request it serves to a file so
tests can count listings and reads."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time

from tb_server import free_port, server_process

# Credentials moto accepts; nothing leaves this machine: every client is pointed at the server
# (AWS_ENDPOINT_URL for boto3/s3fs, S3_ENDPOINT for TensorBoard's own S3 support).
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


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
        text = re.sub(
            r"\x1b\[[0-9;]*m", "", text
        )  # werkzeug colours some lines when click is there
        return re.findall(r'"((?:GET|HEAD|PUT|POST|DELETE) [^"]*)"', text)

    def listings(self, bucket: str) -> list[str]:
        return [r for r in self.requests() if re.match(rf"GET /{re.escape(bucket)}/?\?", r)]

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

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
    argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # the request log written at once
    with server_process("moto_server", argv, port, "/moto-api/", 60, env) as (endpoint, log):
        yield S3Server(endpoint, log)

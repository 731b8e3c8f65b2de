"""Times uploads of one file through a running `sitehost serve`, as a partner sends them
(requests_oauthlib): base64 in one call, or, with --staged, a staged upload (the session,
the form posted with the file, the create). Usage:
upload_timing.py URL KEY SECRET FILE [ROUNDS] [--staged]"""
import base64
import json
import os
import statistics
import sys
import time

import requests
from requests_oauthlib import OAuth1Session

args = [a for a in sys.argv[1:] if a != "--staged"]
staged = "--staged" in sys.argv[1:]
url, key, secret, path = args[:4]
rounds = int(args[4]) if len(args) > 4 else 5
name = path.rsplit("/", 1)[-1]
api = OAuth1Session(key, client_secret=secret)


def base64_upload(body):
    reply = api.post(url + "/api/v2/images/", data=body, headers={"Content-Type": "application/json"})
    assert reply.status_code == 201, reply.text


def staged_upload():
    """The three calls of docs/api.md's example, from the session to the 201."""
    session = api.post(url + "/api/v2/images/uploads/", json={"name": name, "size": os.path.getsize(path)})
    assert session.status_code == 201, session.text
    s = session.json()
    with open(path, "rb") as f:
        requests.post(s["url"], data=s["fields"], files={"file": f}).raise_for_status()
    reply = api.post(url + "/api/v2/images/", json={"upload_id": s["upload_id"]})
    assert reply.status_code == 201, reply.text


# The base64 body is serialised once, outside the timing: what is timed is the request,
# signing included, from the first byte sent to the 201 received.
body = None if staged else json.dumps({"upload": {"name": name, "file": base64.b64encode(open(path, "rb").read()).decode()}})
times = []
for _ in range(rounds):
    start = time.perf_counter()
    staged_upload() if staged else base64_upload(body)
    times.append((time.perf_counter() - start) * 1000)
print("%s upload of %s (%d bytes) through sitehost serve: median %.0f ms (runs: %s)"
      % ("staged" if staged else "base64", name, os.path.getsize(path), statistics.median(times),
         ", ".join("%.0f" % t for t in times)))

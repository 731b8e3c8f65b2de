"""Times base64 uploads of one file through a running `sitehost serve`, as a partner sends
them (requests_oauthlib). Usage: upload_timing.py URL KEY SECRET FILE [ROUNDS]"""
import base64
import json
import statistics
import sys
import time

from requests_oauthlib import OAuth1Session

url, key, secret, path = sys.argv[1:5]
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 5
api = OAuth1Session(key, client_secret=secret)
content = base64.b64encode(open(path, "rb").read()).decode()
# The body is serialised once, outside the timing: what is timed is the request, signing
# included, from the first byte sent to the 201 received.
body = json.dumps({"upload": {"name": path.rsplit("/", 1)[-1], "file": content}})
times = []
for _ in range(rounds):
    start = time.perf_counter()
    reply = api.post(url + "/api/v2/images/", data=body, headers={"Content-Type": "application/json"})
    times.append((time.perf_counter() - start) * 1000)
    assert reply.status_code == 201, reply.text
print("base64 upload of %s through sitehost serve: median %.0f ms (runs: %s)"
      % (path.rsplit("/", 1)[-1], statistics.median(times), ", ".join("%.0f" % t for t in times)))

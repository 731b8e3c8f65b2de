"""Schemathesis hooks for scripts/check-openapi (loaded through SCHEMATHESIS_HOOKS).

Every request is signed as partners sign them: requests_oauthlib's OAuth1 with the key and
secret of the `sitehost serve` under test, applied by requests to the final prepared
request, so each request (retries and checks' extra requests included) gets a fresh nonce
and timestamp and a signature over the exact URL sent.
"""

import atexit
import json
import os
import re
import threading

import hypothesis.internal.lambda_sources as _lambda_sources
import schemathesis
from requests_oauthlib import OAuth1

# Hypothesis describes strategies (for its reports) by parsing the source of their lambdas.
# Deep in the recursion that builds the nested business bodies (locations, phones), that
# parse can fail, and CPython 3.11.7 reports the failure as "SystemError: AST constructor
# recursion depth mismatch" (gh-106905, fixed in 3.11.8), which Hypothesis then takes for a
# flaky test. A description is only a name in a report: when the parse fails, the lambda
# is described as unknown, as Hypothesis does itself when it cannot find the source.
_describe_lambda = _lambda_sources._lambda_description


def _describe_lambda_or_not(f, *args, **kwargs):
    try:
        return _describe_lambda(f, *args, **kwargs)
    except (SystemError, RecursionError):
        return "lambda: <unknown>"


_lambda_sources._lambda_description = _describe_lambda_or_not

schemathesis.auth.set_from_requests(
    OAuth1(os.environ["SITEHOST_KEY"], client_secret=os.environ["SITEHOST_SECRET"])
)

# Upload by URL must never reach out: any generated value a URL parser could read as an
# http(s) URL (WHATWG parsers drop tabs and newlines anywhere and control characters and
# spaces around) is replaced by one on 192.0.2.1 (TEST-NET-1, documentation only), which
# the fetcher refuses before connecting. Other values go as generated (the fetcher refuses
# their scheme without any network).
_IGNORED = re.compile(r"[\t\n\r]")
_SAFE_URL = "http://192.0.2.1/generated.png"


def _could_be_http(value):
    cleaned = _IGNORED.sub("", value).strip("".join(chr(c) for c in range(0x21))).lower()
    return cleaned.startswith(("http:", "https:"))


@schemathesis.hook
def before_call(context, case, kwargs):
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("external_url"), str):
        if _could_be_http(body["external_url"]):
            body["external_url"] = _SAFE_URL


# The status codes each operation got, written at exit to SITEHOST_STATUS_TALLY (when set),
# so scripts/check-openapi can tell that signed requests got through (a broken signer would
# pass every check with 401s alone).
_tally = {}
_tally_lock = threading.Lock()


@schemathesis.hook
def after_call(context, case, response):
    key = f"{case.method.upper()} {case.path}"
    with _tally_lock:
        codes = _tally.setdefault(key, {})
        codes[response.status_code] = codes.get(response.status_code, 0) + 1


def _write_tally():
    path = os.environ.get("SITEHOST_STATUS_TALLY")
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(_tally, out, indent=1, sort_keys=True)


atexit.register(_write_tally)

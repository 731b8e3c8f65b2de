"""Schemathesis hooks for scripts/check-openapi (loaded through SCHEMATHESIS_HOOKS).

Every request is signed as partners sign them: requests_oauthlib's OAuth1 with the key and
secret of the `sitehost serve` under test, applied by requests to the final prepared
request, so each request (retries and checks' extra requests included) gets a fresh nonce
and timestamp and a signature over the exact URL sent.

Generated ids almost never name a record, so on their own the writes that refer to one (a
location's business, a post's site) and the reads by id answer 400 or 404 every time, and
a generated base64 string is never an image. So every other request gets real ones: the
ids of records made at start (a business, a site, a location, a post and an image, through
the API) and of those the run creates, and, for an upload, a small PNG. Each operation then
sees input that succeeds as well as input that fails; scripts/check-openapi fails unless
every create answered 201 and every read by id 200 at least once.
"""

import atexit
import base64
import itertools
import json
import os
import re
import threading
import uuid
import zlib

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

_SIGNER = OAuth1(os.environ["SITEHOST_KEY"], client_secret=os.environ["SITEHOST_SECRET"])
schemathesis.auth.set_from_requests(_SIGNER)


def _png(width, height):
    """A valid RGB PNG of a gradient (made here: no image library in this .venv)."""
    def chunk(kind, data):
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")
    rows = b"".join(b"\0" + bytes(v for x in range(width) for v in (x * 7 % 256, y * 5 % 256, 90))
                    for y in range(height))
    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes((8, 2, 0, 0, 0))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


_PNG_BASE64 = base64.b64encode(_png(48, 32)).decode()

# The resources whose records the run refers to, by the path segment that names them.
_RESOURCES = ("businesses", "locations", "sites", "posts", "images")
# Ids at hand per resource: made at start (never updated or deleted by substitution, so
# they stay readable) and made by the run (which updates and deletes may use).
_fixtures = {resource: [] for resource in _RESOURCES}
_created = {resource: [] for resource in _RESOURCES}
_ids_lock = threading.Lock()
_turn = itertools.count()


def _make_fixtures():
    """One record of each resource, made through the API the run tests."""
    import requests
    base = os.environ.get("SITEHOST_BASE_URL")
    if not base:
        return
    api = requests.Session()
    api.auth = _SIGNER

    def create(resource, body):
        answer = api.post(f"{base}/api/v2/{resource}/", json=body, timeout=30)
        if answer.status_code != 201:
            raise SystemExit(f"schemathesis fixtures: POST {resource} answered "
                             f"{answer.status_code}: {answer.text[:300]}")
        made = answer.json()["id"]
        _fixtures[resource].append(made)
        return made

    business = create("businesses", {"business_name": "Fuzzing fixture", "partner_business_id": "fuzz-1"})
    create("locations", {"business_id": business, "street": "1 Main St", "city": "Portland", "state": "OR",
                         "postal_code": "97205", "country": "US"})
    site = create("sites", {"business_id": business, "domain": "fuzz-fixture.example.com",
                            "subdomain": "www", "title": "Fuzzing fixture"})
    create("posts", {"site_id": site, "title": "Fixture", "content": "<p>Fixture</p>"})
    create("images", {"site_id": site, "upload": {"name": "fixture.png", "file": _PNG_BASE64}})


_make_fixtures()


def _known_id(resource, for_change):
    """An id of `resource` for every other call (None for the rest): one the run created for
    an update or delete, any known one for a read or a reference."""
    if next(_turn) % 2:
        return None
    with _ids_lock:
        pool = _created[resource] if for_change else _fixtures[resource] + _created[resource]
        if not pool:
            return None
        return pool[next(_turn) % len(pool)]


# A body's reference to another record, by field: the resource it names.
_REFERENCES = {"business_id": "businesses", "site_id": "sites"}


def _use_known_ids(case):
    method = case.method.upper()
    segments = case.path.strip("/").split("/")
    resource = segments[2] if len(segments) > 2 else None
    if resource in _RESOURCES and "id" in (case.path_parameters or {}) \
            and isinstance(case.path_parameters["id"], int):
        known = _known_id(resource, for_change=method in ("PUT", "DELETE"))
        if known is not None:
            case.path_parameters["id"] = known
    body = case.body if isinstance(case.body, dict) else None
    for params in (body, case.query):
        if not isinstance(params, dict):
            continue
        for field, referenced in _REFERENCES.items():
            value = params.get(field)
            # A query's ids are strings in some filters (`site_id` of posts): the same type.
            if isinstance(value, (int, str)) and not isinstance(value, bool):
                known = _known_id(referenced, for_change=False)
                if known is not None:
                    params[field] = known if isinstance(value, int) else str(known)
    if body is None or next(_turn) % 2:
        return
    # The other half of the bodies is made to succeed where the schema cannot say how:
    upload = body.get("upload")
    if isinstance(upload, dict) and isinstance(upload.get("file"), str):
        # a generated base64 string is never an image;
        upload["file"] = _PNG_BASE64
    if case.path == "/api/v2/locations/" and method == "POST" \
            and body.get("service_area_only") is not True and not body.get("street"):
        # a location needs a street unless it serves an area only, which the schema's
        # `required` cannot say (docs/openapi.json says it in words);
        body["street"] = "1 Main St"
    # and schemathesis draws `Idempotency-Key`s from a handful of short strings, so most
    # creates reused a key with another body: a 422 (idempotency.rs) before any other check.
    headers = case.headers or {}
    for name in list(headers):
        if name.lower() == "idempotency-key":
            headers[name] = uuid.uuid4().hex

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
    _use_known_ids(case)
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
    # A record the run made: at hand for later reads, references, updates and deletes.
    segments = case.path.strip("/").split("/")
    if case.method.upper() == "POST" and response.status_code == 201 and len(segments) == 3 \
            and segments[2] in _RESOURCES:
        try:
            made = response.json().get("id")
        except ValueError:
            made = None
        if isinstance(made, int):
            with _ids_lock:
                _created[segments[2]].append(made)


def _write_tally():
    path = os.environ.get("SITEHOST_STATUS_TALLY")
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(_tally, out, indent=1, sort_keys=True)


atexit.register(_write_tally)

"""A partner's code, as it already is: requests_oauthlib against the v2 API.

    SITEHOST_URL=http://127.0.0.1:3000 SITEHOST_KEY=... SITEHOST_SECRET=... python examples/partner.py
"""
import os

from requests_oauthlib import OAuth1Session

base = os.environ.get("SITEHOST_URL", "http://127.0.0.1:3000") + "/api/v2/"
api = OAuth1Session(os.environ["SITEHOST_KEY"], client_secret=os.environ["SITEHOST_SECRET"])

created = api.post(base + "businesses/", json={"business_name": "Harbour Cafe", "partner_business_id": "hc-77"})
assert created.status_code == 201, created.text
business = created.json()
print("created", business["id"], business["slug"], created.headers["Location"])

listing = api.get(base + "businesses/", params={"partner_business_id": "hc-77", "project_type": "default"})
assert listing.status_code == 200, listing.text
print("total_count", listing.json()["meta"]["total_count"])

updated = api.put(base + "businesses/%d/" % business["id"], json={"id": business["id"], "deleted": True})
assert updated.status_code == 200 and updated.json()["deleted"] is True, updated.text
print("soft-deleted", business["id"])

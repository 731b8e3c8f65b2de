// Partner code in Node.js, as it already is: the two OAuth 1.0a libraries Node partners use,
// each driving list, filter, create, update and a base64 upload against a running
// `sitehost serve`. `oauth` (node-oauth, under passport's OAuth 1.0a strategies) is
// constructed with version '1.0A', as its README shows, so it signs oauth_version="1.0A";
// `oauth-1.0a` signs with fetch() and oauth_version="1.0".
//
//   SITEHOST_URL=http://127.0.0.1:3000 SITEHOST_KEY=... SITEHOST_SECRET=... node partner.mjs
//
// Run by cli/tests/sitehost/node_partner.rs, which installs the pinned libraries first.
import crypto from "node:crypto";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const OAuth1a = require("oauth-1.0a");
const { OAuth } = require("oauth");

const base = `${process.env.SITEHOST_URL ?? "http://127.0.0.1:3000"}/api/v2/`;
const key = process.env.SITEHOST_KEY;
const secret = process.env.SITEHOST_SECRET;

// A 1x1 PNG.
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

function parse(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

// oauth-1.0a: signs the method and URL (its query included); a JSON body is not signed.
function withOauth1a() {
  const oauth = OAuth1a({
    consumer: { key, secret },
    signature_method: "HMAC-SHA1",
    hash_function: (text, hmacKey) =>
      crypto.createHmac("sha1", hmacKey).update(text).digest("base64"),
  });
  return async (method, url, body) => {
    const headers = oauth.toHeader(oauth.authorize({ url, method }));
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: parse(await response.text()) };
  };
}

// node-oauth: two-legged (no token), version '1.0A'; a string body with its content type
// is sent as is and not signed.
function withNodeOauth() {
  const oauth = new OAuth(null, null, key, secret, "1.0A", null, "HMAC-SHA1");
  return (method, url, body) =>
    new Promise((resolve, reject) => {
      const done = (err, data, response) => {
        if (err && err.statusCode === undefined) return reject(err);
        resolve({
          status: err ? err.statusCode : response.statusCode,
          body: parse(err ? err.data : data),
        });
      };
      if (method === "GET") oauth.get(url, null, null, done);
      else
        oauth[method.toLowerCase()](
          url,
          null,
          null,
          JSON.stringify(body),
          "application/json",
          done,
        );
    });
}

function expect(what, reply, status) {
  if (reply.status !== status) {
    throw new Error(
      `${what}: expected ${status}, got ${reply.status}: ${JSON.stringify(reply.body)}`,
    );
  }
  console.log(`${what} ${reply.status}`);
  return reply.body;
}

async function drive(library, call) {
  // A partner id with a space, an ampersand and a non-ASCII letter: the filter's query is
  // signed as the library encodes it.
  const partnerId = `node ${library} & café`;
  const created = expect(
    `${library} create`,
    await call("POST", `${base}businesses/`, {
      business_name: `Node ${library}`,
      partner_business_id: partnerId,
    }),
    201,
  );
  const listed = expect(
    `${library} list`,
    await call("GET", `${base}businesses/?limit=5`),
    200,
  );
  if (listed.meta.total_count < 1) throw new Error(`${library} list: nothing listed`);
  const filtered = expect(
    `${library} filter`,
    await call(
      "GET",
      `${base}businesses/?partner_business_id=${encodeURIComponent(partnerId)}&deleted=0`,
    ),
    200,
  );
  if (filtered.meta.total_count !== 1 || filtered.objects[0].id !== created.id) {
    throw new Error(`${library} filter: ${JSON.stringify(filtered)}`);
  }
  const updated = expect(
    `${library} update`,
    await call("PUT", `${base}businesses/${created.id}/`, {
      id: created.id,
      business_name: `Node ${library} renamed`,
      deleted: true,
    }),
    200,
  );
  if (updated.deleted !== true || updated.business_name !== `Node ${library} renamed`) {
    throw new Error(`${library} update: ${JSON.stringify(updated)}`);
  }
  const image = expect(
    `${library} upload`,
    await call("POST", `${base}images/`, {
      upload: { name: "dot.png", file: PNG },
      site_id: 7,
      business_id: created.id,
    }),
    201,
  );
  if (image.width !== 1 || image.business_id !== created.id) {
    throw new Error(`${library} upload: ${JSON.stringify(image)}`);
  }
}

await drive("oauth-1.0a", withOauth1a());
await drive("oauth", withNodeOauth());
console.log("all done");

//! Every `events/*.json` (API Gateway HTTP API v2 events) is parsed with
//! `lambda_http::request::from_str` and run through its function's handler, under a fixed
//! clock and a known key, asserting status and body.
//!
//! The events are signed with the fixture key below. `SITEHOST_WRITE_EVENTS=1 cargo test
//! -p sitehost --test integration lambda_events` rewrites them after a change to
//! `events.rs`.

mod events;
mod origin_secret;
mod payload_limits;
mod routing;

use crate::support::events::FixtureKey;

const KEY: &str = "eventsfixturekey0001";
const SECRET: &str = "eventsfixturesecret000000000000000000001";
const FIXTURE: FixtureKey = FixtureKey {
    account: "events",
    key: KEY,
    secret: SECRET,
};
const API_HOST: &str = "abc123.execute-api.us-east-1.amazonaws.com";

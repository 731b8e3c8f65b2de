//! The integration tests of `sitehost`, in one test binary: each binary links the whole
//! AWS and image stack, so one link serves every suite. The modules are the former test
//! binaries; `support` is what they share.
//!
//! They run on parallel threads of one process, so nothing here may change process-wide
//! state that another test reads (environment variables, the current directory, a global
//! `tracing` subscriber other than `support::init_tracing`'s). Tables, buckets, data
//! directories and ports are each test's own.
//!
//! `cargo test -p sitehost --test integration store_contract::` runs one suite.

mod auth;
mod aws_faults;
mod budget_figures;
mod cloudfront_events;
mod doc_facts;
mod double_behaviour;
mod dynamodb_busy;
mod http_api;
mod idempotency;
mod images;
mod images_aws;
mod images_integrity;
mod lambda_events;
mod locations_http;
mod openapi;
mod site_addresses_http;
mod sites_http;
mod staged_uploads;
mod store_contract;
mod support;
mod template;

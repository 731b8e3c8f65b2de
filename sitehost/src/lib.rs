//! sitehost: the v2 partner API for businesses and images, shared by the `sitehost`
//! command and the Lambda functions. Everything here is testable without AWS.
//!
//! The modules form layers, bottom to top; each uses only the ones below it
//! (docs/architecture.md, held by `scripts/code-shape --check`):
//! foundation (`error`, `clock`, `config`), `domain` (the records and their rules), `store`
//! (the storage traits and every implementation), the services operations call (`auth`;
//! with the `images` feature `fetch` and `image_pipeline`), `operations` (with `images`,
//! `upload`), `deployment` (what a build composes), `api` (HTTP), and with the `local`
//! feature the `sitehost` command's `server` and `client`.

// foundation
pub mod clock;
pub mod config;
pub mod error;

pub mod domain;

pub mod store;

// services
pub mod auth;
#[cfg(feature = "images")]
pub mod fetch;
#[cfg(feature = "images")]
pub mod image_pipeline;

pub mod operations;
#[cfg(feature = "images")]
pub mod upload;

pub mod deployment;

pub mod api;

#[cfg(feature = "local")]
pub mod client;
#[cfg(feature = "local")]
pub mod server;

pub use error::{ApiError, Result};

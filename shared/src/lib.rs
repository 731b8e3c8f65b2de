//! sitehost: the v2 partner API for businesses and images, shared by the `sitehost`
//! command and the Lambda functions. Everything here is testable without AWS.

pub mod account;
pub mod api;
pub mod auth;
pub mod business;
#[cfg(feature = "local")]
pub mod client;
pub mod clock;
pub mod config;
pub mod error;
pub mod image;
pub mod operations;
pub mod store;
pub mod telemetry;
pub mod validate;

pub use error::{ApiError, Result};

//! sitehost: the v2 partner API for businesses and images, shared by the `sitehost`
//! command and the Lambda functions. Everything here is testable without AWS.

pub mod account;
pub mod api;
pub mod auth;
pub mod business;
pub mod clock;
pub mod collation;
pub mod config;
pub mod deployment;
pub mod error;
pub mod image_record;
#[cfg(feature = "local")]
pub mod local;
pub mod location;
pub mod operations;
pub mod post;
#[cfg(feature = "files")]
pub mod s3;
pub mod site;
pub mod store;
#[cfg(feature = "images")]
pub mod upload;
pub mod validate;

pub use error::{ApiError, Result};

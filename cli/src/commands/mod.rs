//! One module per `sitehost` subcommand: its command-line options and what it does.

pub mod businesses;
pub mod events;
pub mod files;
pub mod images;
pub mod keys;
pub mod lambda;
pub mod locations;
pub mod serve;
pub mod variants;

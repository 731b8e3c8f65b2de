//! The embedded store: one SQLite file in the data directory.

//! Settings from the environment, read once per cold start.

//! Counting clicks.

pub mod destination;
pub mod flusher;
pub mod store;
pub mod visitor;

pub use store::*;

//! The storage benchmark: an I/O engine (io_uring, or threads where
//! io_uring is missing), fio-compatible latency statistics, the suites
//! people compare drives with, their grades, and stored reports.
//!
//! Reports are the public face: see [`report`] for the JSON types and
//! [`report::list`] / [`report::for_device`] to read them back.

pub mod buffer;
pub mod dio;
pub mod engine;
pub mod grade;
pub mod histogram;
pub mod job;
pub mod machine;
pub mod measure;
pub mod progress;
pub mod random;
pub mod render;
pub mod report;
pub mod run;
#[doc(hidden)]
pub mod sample;
pub mod session;
pub mod suite;
pub mod target;
pub mod testfile;
pub mod threads;
pub mod times;
pub mod uring;

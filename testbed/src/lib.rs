//! Placeholder; the testbed harness lives here.

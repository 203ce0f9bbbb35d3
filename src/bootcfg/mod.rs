//! Boot-file parsers and editors that keep every other byte.

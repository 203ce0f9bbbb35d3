//! The tool crate's tests, one binary: each module is the file of its
//! name in this folder, whose first lines say more.

mod docs; // the docs' generated blocks are what the code writes now
mod install_extras; // install-extras into a folder standing for /
mod man_pages; // man pages and completions from the clap definition
mod package; // the package's files, its copyright file's crates

//! A unified git diff (`git diff`'s text, as the changes of a run are recorded) shown as HTML:
//! one folded section per file with its status (added, deleted, renamed, mode change, binary)
//! and counts, its hunks with added and removed lines marked by class for the page's
//! stylesheet to colour. Bounded: a 10 MB diff renders to a page of bounded size, the rest
//! summarized, never one page of everything.
//!
//! `parse.rs` reads the text into files and hunks, `render.rs` writes the HTML. This file is
//! their table of contents.

mod parse;
mod render;

pub(crate) use render::{diff_html, Caps};

#[cfg(test)]
mod tests;

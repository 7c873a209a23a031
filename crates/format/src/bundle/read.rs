//! Reading a bundle as a stream: the header and manifest lines (bounded), then one section at
//! a time, each a `BufRead` limited to the size the manifest gives it and hashed as it is
//! consumed; `Section::finish` reads what the caller left, refuses a section cut short or
//! whose bytes lack the manifest's SHA-256, and the reader refuses bytes after the last
//! section. Nothing is held beyond a buffer: a 50 MB transcript streams through.

use std::io::{BufRead, Read};

use sha2::{Digest, Sha256};

use super::manifest::{Entry, Manifest, SectionKind, MAGIC, MAX_MANIFEST};
use super::Error;
use crate::time::hex;

/// A bundle being read.
pub struct BundleReader<R: BufRead> {
    input: R,
    manifest: Manifest,
    kinds: Vec<SectionKind>,
    next: usize,
}

fn damaged<T>(why: impl Into<String>) -> Result<T, Error> {
    Err(Error::Damaged(why.into()))
}

/// One line of at most `MAX_MANIFEST` bytes, without its end; `None` at the end of the input.
fn read_line(input: &mut impl BufRead, what: &str) -> Result<Option<String>, Error> {
    let mut buf = Vec::new();
    let n = input.take(MAX_MANIFEST + 1).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    let Some(text) = buf.strip_suffix(b"\n") else {
        return damaged(if n as u64 > MAX_MANIFEST {
            format!("the {what} line is longer than {MAX_MANIFEST} bytes: not a runledger bundle")
        } else {
            format!("the file ends inside the {what} line: the bundle is truncated")
        });
    };
    match String::from_utf8(text.to_vec()) {
        Ok(text) => Ok(Some(text)),
        Err(_) => damaged(format!("the {what} line is not UTF-8")),
    }
}

impl<R: BufRead> BundleReader<R> {
    /// Reads and checks the header and the manifest.
    pub fn open(mut input: R) -> Result<BundleReader<R>, Error> {
        let header = read_line(&mut input, "header")?.unwrap_or_default();
        let mut words = header.split(' ');
        if words.next() != Some(MAGIC) {
            return damaged(format!(
                "the file does not begin with {MAGIC:?}: not a runledger bundle"
            ));
        }
        let format = words.next().unwrap_or_default();
        if format != super::FORMAT.to_string() || words.next().is_some() {
            return damaged(format!(
                "bundle format {format:?}; this version reads format {}",
                super::FORMAT
            ));
        }
        let Some(line) = read_line(&mut input, "manifest")? else {
            return damaged("the file ends before its manifest: the bundle is truncated");
        };
        let manifest: Manifest = serde_json::from_str(&line)
            .map_err(|e| Error::Damaged(format!("the manifest is not a bundle manifest: {e}")))?;
        let kinds = manifest.check()?;
        if manifest.body_len().is_none() {
            return damaged("the manifest's section sizes add up to more than a file can hold");
        }
        Ok(BundleReader {
            input,
            manifest,
            kinds,
            next: 0,
        })
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The next section, `None` after the last one (when the input must end too).
    pub fn next_section(&mut self) -> Result<Option<Section<'_, R>>, Error> {
        let Some(entry) = self.manifest.sections.get(self.next).cloned() else {
            let mut rest = [0u8; 1];
            if self.input.read(&mut rest)? > 0 {
                return damaged("bytes follow the last section the manifest names");
            }
            return Ok(None);
        };
        let kind = self.kinds[self.next];
        self.next += 1;
        let expected = format!("section {} {}", entry.name, entry.size);
        match read_line(&mut self.input, "section")? {
            Some(line) if line == expected => {}
            Some(line) => {
                return damaged(format!(
                    "a section line reads {:?} where the manifest gives {expected:?}",
                    line.chars().take(200).collect::<String>()
                ))
            }
            None => {
                return damaged(format!(
                    "the file ends before section {}: the bundle is truncated",
                    entry.name
                ))
            }
        }
        Ok(Some(Section {
            remaining: entry.size,
            entry,
            kind,
            input: &mut self.input,
            hasher: Sha256::new(),
        }))
    }
}

/// One section's bytes: at most its size, hashed as they are consumed.
pub struct Section<'a, R: BufRead> {
    pub entry: Entry,
    pub kind: SectionKind,
    input: &'a mut R,
    remaining: u64,
    hasher: Sha256,
}

impl<R: BufRead> Section<'_, R> {
    /// Reads what is left of the section, then checks its size and digest and the line end
    /// after it.
    pub fn finish(mut self) -> Result<(), Error> {
        std::io::copy(&mut self, &mut std::io::sink())?;
        let name = &self.entry.name;
        if self.remaining > 0 {
            return damaged(format!(
                "section {name} is truncated: the file ends after {} of its {} bytes",
                self.entry.size - self.remaining,
                self.entry.size
            ));
        }
        let digest = hex(&std::mem::take(&mut self.hasher).finalize());
        if digest != self.entry.sha256 {
            return damaged(format!(
                "section {name} does not have the SHA-256 the manifest gives it: it was changed \
                 or damaged"
            ));
        }
        let mut end = [0u8; 1];
        match self.input.read(&mut end)? {
            1 if end[0] == b'\n' => Ok(()),
            0 => damaged(format!(
                "the file ends right after section {name}: the bundle is truncated"
            )),
            _ => damaged(format!(
                "section {name} is longer than the manifest's {} bytes",
                self.entry.size
            )),
        }
    }
}

impl<R: BufRead> BufRead for Section<'_, R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.remaining == 0 {
            return Ok(&[]);
        }
        let buf = self.input.fill_buf()?;
        let n = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        Ok(&buf[..n])
    }

    fn consume(&mut self, amount: usize) {
        // The bytes consumed are the ones `fill_buf` just returned, still buffered.
        if let Ok(buf) = self.input.fill_buf() {
            let n = amount.min(buf.len());
            self.hasher.update(&buf[..n]);
        }
        self.remaining -= amount as u64;
        self.input.consume(amount);
    }
}

impl<R: BufRead> Read for Section<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let buf = self.fill_buf()?;
        let n = buf.len().min(out.len());
        out[..n].copy_from_slice(&buf[..n]);
        self.consume(n);
        Ok(n)
    }
}

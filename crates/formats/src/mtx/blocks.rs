//! The body read in blocks of whole lines: from any reader on one thread, or (plain files on
//! unix) by positional reads, recycling the buffers the parser is done with.

use super::*;

/// How the body is cut: blocks read at a time, pieces parsed by one task.
#[derive(Clone, Copy, Debug)]
pub(super) struct Chunking {
    /// Bytes of text read at a time.
    pub(super) block: usize,
    /// Bytes of text per piece parsed by one task (cut at the next line end).
    pub(super) piece: usize,
}

/// Blocks of 32 MiB, pieces of 1 MiB.
pub(super) const CHUNKING: Chunking = Chunking {
    block: 32 << 20,
    piece: 1 << 20,
};

/// What the block reader hands to the parser.
pub(super) enum Block {
    /// Whole lines (ending in `\n`, except the last line of the input).
    Lines(Vec<u8>),
    /// The next line is longer than [`MAX_LINE_BYTES`].
    LongLine,
    /// Reading failed after the lines already handed over.
    Failed(io::Error),
}

/// Reads the body in blocks of whole lines.
pub(super) struct Blocks<R> {
    pub(super) reader: R,
    /// The start of a line whose end has not been read yet.
    pub(super) carry: Vec<u8>,
    pub(super) pending: Option<Block>,
    pub(super) done: bool,
    /// Bytes read at a time.
    pub(super) block: usize,
    /// Buffers the parser is done with, reused so that each block does not fault in fresh pages.
    pub(super) recycled: Option<std::sync::mpsc::Receiver<Vec<u8>>>,
}

/// Where the blocks come from.
pub(super) trait Fill {
    /// Appends up to `max` bytes to `buf`; fewer only at the end of the input.
    fn fill(&mut self, buf: &mut Vec<u8>, max: usize) -> io::Result<usize>;
}

/// Any reader, read on one thread (a gzip stream is inflated here).
pub(super) struct Stream<R>(pub(super) R);

impl<R: Read> Fill for Stream<R> {
    fn fill(&mut self, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        (&mut self.0).take(max as u64).read_to_end(buf)
    }
}

/// A regular file's bytes `offset..end`, each block read by positional reads of 1 MiB on every
/// core (a single thread's copy out of the page cache would bound the rate).
#[cfg(unix)]
pub(super) struct Positional<'a> {
    pub(super) file: &'a File,
    pub(super) offset: u64,
    pub(super) end: u64,
}

#[cfg(unix)]
impl Fill for Positional<'_> {
    fn fill(&mut self, buf: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        const PART: usize = 1 << 20;
        let n = (max as u64).min(self.end.saturating_sub(self.offset)) as usize;
        let start = buf.len();
        buf.resize(start + n, 0);
        let (file, offset) = (self.file, self.offset);
        let parts: Vec<io::Result<()>> = buf[start..]
            .par_chunks_mut(PART)
            .enumerate()
            .map(|(i, c)| file.read_exact_at(c, offset + (i * PART) as u64))
            .collect();
        // As a sequential read: the parts before the first failure are kept.
        if let Some(i) = parts.iter().position(Result::is_err) {
            buf.truncate(start + i * PART);
            self.offset = self.end;
            let e = parts.into_iter().nth(i).and_then(Result::err);
            return Err(e.unwrap_or_else(|| io::Error::other("read failed")));
        }
        self.offset += n as u64;
        Ok(n)
    }
}

impl<S: Fill> Iterator for Blocks<S> {
    type Item = Block;

    fn next(&mut self) -> Option<Block> {
        loop {
            if let Some(b) = self.pending.take() {
                return Some(b);
            }
            if self.done {
                return None;
            }
            // Room for a carried line (at most MAX_LINE_BYTES) and a block, so that a recycled
            // buffer never grows.
            let room = self
                .block
                .saturating_add(self.block.min(MAX_LINE_BYTES as usize + 1));
            let mut buf = match self.recycled.as_ref().and_then(|r| r.try_recv().ok()) {
                Some(mut b) => {
                    b.clear();
                    b.reserve(room.max(self.carry.len() + self.block));
                    b
                }
                None => Vec::with_capacity(room.max(self.carry.len() + self.block)),
            };
            buf.append(&mut self.carry);
            let read = self.reader.fill(&mut buf, self.block);
            match read {
                Ok(n) if n < self.block => {
                    // The end of the input: what is left is the last line.
                    self.done = true;
                    if buf.is_empty() {
                        return None;
                    }
                    return Some(Block::Lines(buf));
                }
                Ok(_) => {}
                Err(e) => {
                    self.done = true;
                    self.pending = Some(Block::Failed(e));
                }
            }
            let cut = memchr::memrchr(b'\n', &buf).map_or(0, |i| i + 1);
            let tail = buf.split_off(cut);
            if self.pending.is_none() {
                if tail.len() as u64 > MAX_LINE_BYTES {
                    self.done = true;
                    self.pending = Some(Block::LongLine);
                } else {
                    self.carry = tail;
                }
            }
            if !buf.is_empty() {
                return Some(Block::Lines(buf));
            }
        }
    }
}

impl<R> Blocks<R> {
    pub(super) fn new(reader: R, chunking: Chunking) -> Self {
        Self {
            reader,
            carry: Vec::new(),
            pending: None,
            done: false,
            block: chunking.block,
            recycled: None,
        }
    }
}
